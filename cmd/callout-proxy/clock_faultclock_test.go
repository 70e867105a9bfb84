//go:build faultclock

package main

import (
	"testing"
	"time"
)

func TestFaultClockOffset(t *testing.T) {
	env := map[string]string{envFaultClockOffset: "-90s"}
	now, err := processClock(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(now()); d < 89*time.Second || d > 91*time.Second {
		t.Fatalf("clock is %v behind, want 90 s", d)
	}
	env[envFaultClockOffset] = "soon"
	if _, err := processClock(func(k string) string { return env[k] }); err == nil {
		t.Fatal("a bad offset was accepted")
	}
}
