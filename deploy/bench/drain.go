package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
)

// drainEndpoint is the endpoint of the seeded backlog (run.sh's config).
const drainEndpoint = "drain"

// seed enqueues -n callouts due now on drainEndpoint, each with an
// Idempotency-Key and a 31-byte body, with no proxy running, and prints the
// Redis memory they take (INFO memory used_memory before and after).
func seed(args []string) error {
	fs := flag.NewFlagSet("seed", flag.ExitOnError)
	rurl := fs.String("redis", "redis://127.0.0.1:6390/0", "Redis URL")
	n := fs.Int("n", 100000, "callouts")
	_ = fs.Parse(args)
	ctx := context.Background()
	rdb, store, err := open(*rurl)
	if err != nil {
		return err
	}
	before, err := usedMemory(ctx, rdb)
	if err != nil {
		return err
	}
	body := []byte(`{"amount":100,"currency":"EUR"}`)
	sem := make(chan struct{}, 64)
	errs := make(chan error, 1)
	for i := range *n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := store.Enqueue(ctx, policy.NewCallout{Endpoint: drainEndpoint,
				Issuer: "https://bench.my.salesforce.com", Method: http.MethodPost, Path: "/v1/charges",
				Header: http.Header{"Content-Type": {"application/json"}}, Body: body,
				IdempotencyKey: fmt.Sprintf(`"seed-%d"`, i)}, policy.EnqueueOptions{})
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		}()
	}
	for range cap(sem) {
		sem <- struct{}{}
	}
	select {
	case err := <-errs:
		return err
	default:
	}
	after, err := usedMemory(ctx, rdb)
	if err != nil {
		return err
	}
	per := float64(after-before) / float64(*n)
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"seeded": *n, "body_bytes": len(body),
		"used_memory_delta": after - before, "bytes_per_pending_callout": per,
		"bytes_per_pending_callout_besides_body": per - float64(len(body))})
}

// drain polls the backlog of -endpoint (default drainEndpoint) every 50 ms until it is empty
// and prints the elapsed time, attempts per second, and the number of polls
// (each one pipeline of ZCARD, ZCARD, HGET: 3 commands, 1 round trip), so
// run.sh can subtract the poller's own commands from INFO commandstats.
func drain(args []string) error {
	fs := flag.NewFlagSet("drain", flag.ExitOnError)
	rurl := fs.String("redis", "redis://127.0.0.1:6390/0", "Redis URL")
	n := fs.Int("n", 100000, "callouts seeded")
	endpoint := fs.String("endpoint", drainEndpoint, "endpoint whose backlog to wait for")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after")
	_ = fs.Parse(args)
	ctx := context.Background()
	_, store, err := open(*rurl)
	if err != nil {
		return err
	}
	start := time.Now()
	polls := 0
	for {
		polls++
		items, _, err := store.Backlog(ctx, *endpoint)
		if err != nil {
			return err
		}
		if items == 0 {
			break
		}
		if time.Since(start) > *timeout {
			return fmt.Errorf("backlog still %d after %s", items, *timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	el := time.Since(start)
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"drained": *n, "seconds": el.Seconds(),
		"attempts_per_second": float64(*n) / el.Seconds(), "polls": polls})
}

// open connects to the Redis at URL u and returns the client and a store
// on it with the default options.
func open(u string) (*redis.Client, *redisstore.Store, error) {
	o, err := redis.ParseURL(u)
	if err != nil {
		return nil, nil, err
	}
	o.DisableIdentity = true
	rdb := redis.NewClient(o)
	return rdb, redisstore.New(rdb, redisstore.Options{}), nil
}

// usedMemory is INFO memory's used_memory, in bytes.
func usedMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no used_memory in INFO memory")
}
