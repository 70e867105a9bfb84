package redisstore

// keysOf, epKeys and callout are the names the outbox, replay-job and
// gate-cache files (moving to packages of their own) call the home queue's
// keys by: keysOf(endpoint) is homeQueue(endpoint). Every key is named in
// package keyspace, which documents the data model.
type epKeys = queue

func keysOf(endpoint string) epKeys { return homeQueue(endpoint) }

// callout returns the record key of callout id in this queue.
func (q queue) callout(id string) string { return q.tag + "c:" + id }
