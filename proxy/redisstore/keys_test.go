package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/redis/go-redis/v9"
)

func TestFingerprint(t *testing.T) {
	base := policy.Fingerprint("POST", "/a", "q=1", []byte("body"))
	for _, other := range []string{
		policy.Fingerprint("PUT", "/a", "q=1", []byte("body")),
		policy.Fingerprint("POST", "/a/", "q=1", []byte("body")),
		policy.Fingerprint("POST", "/a", "q=2", []byte("body")),
		policy.Fingerprint("POST", "/a", "q=1", []byte("body!")),
		policy.Fingerprint("POST", "/aq=1", "", []byte("body")), // length prefixes keep fields apart
	} {
		if other == base {
			t.Fatalf("fingerprint collision: %s", base)
		}
	}
	// The value itself is stored (reservations, finished records): SHA-256
	// of "4:POST2:/a3:q=14:body", base64url without padding.
	if base != "5Pgwvo5ROyHr72Ex7JmifkZht3WWcAJXlIgJYIDtHto" {
		t.Fatalf("fingerprint %s, want 5Pgwvo5ROyHr72Ex7JmifkZht3WWcAJXlIgJYIDtHto", base)
	}
	if sum := policy.FingerprintSum("POST", "/a", "q=1", []byte("body")); base64.RawURLEncoding.EncodeToString(sum[:]) != base {
		t.Fatal("FingerprintSum is not Fingerprint before base64url")
	}
}

func TestKeysOfOneEndpointShareASlot(t *testing.T) {
	if got := keyspace.Slot("123456789"); got != 0x31C3%16384 {
		t.Fatalf("crc16 self-check = %#x", got)
	}
	forEachBackend(t, func(t *testing.T, e *env) {
		for i := range 200 {
			endpoint := fmt.Sprintf("api-%d", i)
			k := keyspace.HomeQueue(endpoint)
			id, _ := keyspace.NewCalloutID(endpoint, rand.Reader)
			idKey, _ := keyspace.Callout(id)
			keys := []string{k.Due, k.Lease, k.EndpointHash, k.DL, recordKey(id), idKey, k.Reservation("https://org", "key")}
			want := keyspace.Slot(keys[0])
			for _, key := range keys {
				if keyspace.Slot(key) != want {
					t.Fatalf("%s in slot %d, %s in %d", keys[0], want, key, keyspace.Slot(key))
				}
			}
			if e.b.Cluster() && i%20 == 0 {
				for _, key := range keys {
					got, err := e.b.Client.ClusterKeySlot(ctxT(t), key).Result()
					if err != nil || int(got) != want {
						t.Fatalf("CLUSTER KEYSLOT %s = %d (%v), want %d", key, got, err, want)
					}
				}
			}
		}
	})
}

func TestUnavailable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		if e.b.Mini == nil {
			t.Skip("the outage is simulated by closing miniredis")
		}
		c := redis.NewClient(&redis.Options{
			Addr: e.b.Mini.Addr(), MaxRetries: -1, DialTimeout: time.Second,
			DialerRetries: 1, DialerRetryTimeout: time.Millisecond,
		})
		defer c.Close()
		s := New(c, Options{PinScriptTime: true, Now: e.clk.Now})
		if err := s.Ping(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		e.b.Mini.Close()
		ops := map[string]func() error{
			"ping": func() error { return s.Ping(ctxT(t)) },
			"begin": func() error {
				_, err := s.Begin(ctxT(t), req("x", "k", ""), policy.BeginOptions{Lease: testLease})
				return err
			},
			"claim": func() error { _, err := s.Claim(ctxT(t), "x", claimOpts); return err },
			"get":   func() error { _, err := s.Get(ctxT(t), "00"+strings.Repeat("A", 22)); return err },
			"state": func() error { _, err := s.EndpointState(ctxT(t), "x"); return err },
		}
		for name, op := range ops {
			if err := op(); !errors.Is(err, policy.ErrUnavailable) {
				t.Errorf("%s: error = %v, want ErrUnavailable", name, err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := s.Ping(ctx); errors.Is(err, policy.ErrUnavailable) || !errors.Is(err, context.Canceled) {
			t.Errorf("canceled ping = %v, want context.Canceled only", err)
		}
	})
}
