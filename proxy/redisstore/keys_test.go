package redisstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/redis/go-redis/v9"
)

func TestCalloutIDShape(t *testing.T) {
	id, err := NewCalloutID("payment-api", rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	n, ok := ShardOfID(id)
	if len(id) != IDLen || !ok || n != ShardOf("payment-api") || id[:2] != fmt.Sprintf("%02x", n) {
		t.Fatalf("id %q: shard %d %v, want %d", id, n, ok, ShardOf("payment-api"))
	}
	tests := []struct {
		name string
		id   string
		ok   bool
	}{
		{"valid", id, true},
		{"too short", id[:23], false},
		{"too long", id + "A", false},
		{"uppercase hex", "7F" + id[2:], false},
		{"shard out of range", "80" + id[2:], false},
		{"not base64url", id[:10] + "+" + id[11:], false},
		{"non-canonical last char", id[:23] + "B", false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := ShardOfID(tt.id); ok != tt.ok {
				t.Fatalf("ShardOfID(%q) ok = %v, want %v", tt.id, ok, tt.ok)
			}
		})
	}
	if _, err := NewCalloutID("x", bytes.NewReader(nil)); err == nil {
		t.Fatal("NewCalloutID with a failing reader did not fail")
	}
}

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
	if policy.Fingerprint("POST", "/a", "q=1", []byte("body")) != base || len(base) != 43 {
		t.Fatalf("fingerprint unstable or wrong length: %s", base)
	}
}

func TestKeysOfOneEndpointShareASlot(t *testing.T) {
	if got := keySlot("123456789"); got != 0x31C3%16384 {
		t.Fatalf("crc16 self-check = %#x", got)
	}
	forEachBackend(t, func(t *testing.T, e *env) {
		for i := range 200 {
			endpoint := fmt.Sprintf("api-%d", i)
			k := homeQueue(endpoint)
			id, _ := NewCalloutID(endpoint, rand.Reader)
			idKey, _ := calloutKeyOfID(id)
			keys := []string{k.due, k.lease, k.ep, k.dl, recordKey(id), idKey, k.reservation("https://org", "key")}
			want := keySlot(keys[0])
			for _, key := range keys {
				if keySlot(key) != want {
					t.Fatalf("%s in slot %d, %s in %d", keys[0], want, key, keySlot(key))
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
		s := New(c, Options{Now: e.clk.Now})
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
