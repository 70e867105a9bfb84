package keyspace

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"testing"
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
