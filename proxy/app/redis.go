package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/durable"
)

// defaultReadTimeout is go-redis's socket read timeout, which a WAIT of a
// longer redis.durability_timeout must not outlast.
const defaultReadTimeout = 3 * time.Second

// OpenRedis connects to the configured Redis (single node, Sentinel-managed
// primary, or Cluster), or starts the embedded in-memory one with a loud
// warning on logger when none is set. It returns the client and the
// function that closes it (and stops the embedded Redis). Errors: a
// ConfigError for a redis.url that does not parse; the embedded Redis's
// failure to listen on loopback.
func OpenRedis(rc config.Redis, getenv func(string) string, logger *slog.Logger) (redis.UniversalClient, func(), error) {
	password := ""
	if rc.PasswordEnv != "" {
		password = getenv(rc.PasswordEnv)
	}
	// A pipeline's reply is read within the read timeout: the WAIT of a
	// durable acknowledgement (redis.durability) blocks up to its timeout.
	readTimeout := defaultReadTimeout
	if rc.Durability != "" && rc.Durability != config.DurabilityLocal {
		readTimeout = max(readTimeout, rc.DurabilityTimeout+time.Second)
	}
	switch {
	case rc.URL != "":
		opt, err := redis.ParseURL(rc.URL)
		if err != nil {
			return nil, nil, ConfigError{fmt.Errorf("redis.url: %w", err)}
		}
		if password != "" {
			opt.Password = password
		}
		// Honour context deadlines on the socket, not only the 3–5 s
		// read/dial timeouts: /readyz and the write path bound their Redis
		// check, and a hung Redis must not make them outwait a probe's or
		// an Apex callout's timeout (contract §4, §9).
		opt.ContextTimeoutEnabled = true
		opt.ReadTimeout = max(opt.ReadTimeout, readTimeout)
		c := redis.NewClient(opt)
		return c, func() { c.Close() }, nil
	case rc.Sentinel != nil:
		// go-redis asks the Sentinels for the primary, reconnects to the
		// promoted replica when they announce a failover (+switch-master),
		// and drops connections to a primary that turned replica.
		sentinelPassword := ""
		if rc.Sentinel.PasswordEnv != "" {
			sentinelPassword = getenv(rc.Sentinel.PasswordEnv)
		}
		opt := &redis.FailoverOptions{MasterName: rc.Sentinel.MasterName,
			SentinelAddrs: rc.Sentinel.Addresses, SentinelPassword: sentinelPassword, Password: password,
			ContextTimeoutEnabled: true, ReadTimeout: readTimeout}
		if rc.Sentinel.TLS {
			// The server name is each address's host (crypto/tls).
			opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if err := checkMasterName(opt, logger); err != nil {
			return nil, nil, ConfigError{err}
		}
		c := redis.NewFailoverClient(opt)
		return c, func() { c.Close() }, nil
	case len(rc.Cluster) > 0:
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Cluster, Password: password,
			ContextTimeoutEnabled: true, ReadTimeout: readTimeout})
		return c, func() { c.Close() }, nil
	}
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, nil, fmt.Errorf("embedded redis: %w", err)
	}
	logger.Warn("NO REDIS CONFIGURED: running on an embedded in-memory Redis. NOTHING IS DURABLE: " +
		"scheduled retries, idempotency records and dead letters are lost when this process exits, " +
		"and only this one replica can use them. Set redis.url, redis.sentinel or redis.cluster for production.")
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	return c, func() { c.Close(); m.Close() }, nil
}

// checkMasterName asks every Sentinel of opt which primary it monitors
// under opt.MasterName (SENTINEL get-master-addr-by-name), so that a
// misspelt name fails the start with an error naming it instead of looking
// like an outage (go-redis answers every command with "all sentinels are
// unreachable" then). Errors: every Sentinel that answered knows no master
// by that name. Sentinels that do not answer are only logged: they may come
// up after the proxy (contract §9: /readyz reports Redis, it does not fail
// the start).
func checkMasterName(opt *redis.FailoverOptions, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	answered := 0
	var unreachable []error
	for _, addr := range opt.SentinelAddrs {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr, Password: opt.SentinelPassword,
			TLSConfig: opt.TLSConfig, DisableIdentity: true, MaxRetries: -1})
		_, err := sc.GetMasterAddrByName(ctx, opt.MasterName).Result()
		_ = sc.Close()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, redis.Nil):
			answered++
		default:
			unreachable = append(unreachable, fmt.Errorf("%s: %w", addr, err))
		}
	}
	if answered > 0 {
		return fmt.Errorf("redis.sentinel.master_name: no Sentinel monitors a master named %q "+
			"(%d of %d answered SENTINEL get-master-addr-by-name with nil; check the name against the Sentinels' "+
			"\"sentinel monitor\" lines)", opt.MasterName, answered, len(opt.SentinelAddrs))
	}
	logger.Warn("redis.sentinel: no Sentinel answered at start, so the master name could not be checked",
		"master_name", opt.MasterName, "err", errors.Join(unreachable...))
	return nil
}

// acknowledger is the store's durable acknowledgement for
// redis.durability (contract §11): nil for local; WAIT 1 for replicated
// (per primary on a Cluster); WAITAOF 1 N for fsync, N = 1 with Sentinel
// (a replica's file too), else 0. fsync is checked against the Redis
// version at once: a Redis older than 7.2 ends the start with an error
// naming the version; a Redis that does not answer yet is checked again
// before the first acknowledgement.
func acknowledger(ctx context.Context, rc config.Redis, rdb redis.UniversalClient, logger *slog.Logger) (redisstore.Acknowledger, error) {
	opts := durable.Options{Timeout: rc.DurabilityTimeout}
	switch rc.Durability {
	case config.DurabilityReplicated:
		opts.Replicas = 1
	case config.DurabilityFsync:
		opts.AOF = true
		if rc.Sentinel != nil {
			opts.Replicas = 1
		}
	default:
		return nil, nil
	}
	acks := durable.New(rdb, opts)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := acks.CheckVersion(cctx); err != nil {
		var ve *durable.VersionError
		if errors.As(err, &ve) {
			return nil, ConfigError{err}
		}
		logger.Warn("redis.durability fsync: the Redis version could not be read yet; it is checked before the first write",
			"err", err)
	}
	return acks, nil
}
