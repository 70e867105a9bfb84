package keyspace

import "strconv"

// StatsMinute returns the key of endpoint's console figures in Unix
// minute minute, cp:{sN}:st:m:{ep}:{minute}, in its home shard.
func StatsMinute(endpoint string, minute int64) string {
	return ShardPrefix(ShardOf(endpoint)) + "st:m:" + endpoint + ":" + strconv.FormatInt(minute, 10)
}

// StatsHour returns the key of endpoint's console figures in Unix hour
// hour, cp:{sN}:st:h:{ep}:{hour}, in its home shard.
func StatsHour(endpoint string, hour int64) string {
	return ShardPrefix(ShardOf(endpoint)) + "st:h:" + endpoint + ":" + strconv.FormatInt(hour, 10)
}
