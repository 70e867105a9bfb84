//go:build !faultclock

package main

import "time"

// processClock is this process's wall clock: time.Now. The fault suite's
// build (tag faultclock, clock_faultclock.go) offsets it instead, to run
// replicas whose clocks disagree.
func processClock(getenv func(string) string) (func() time.Time, error) { return time.Now, nil }
