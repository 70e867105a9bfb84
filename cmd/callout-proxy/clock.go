//go:build !faultclock

package main

import "time"

// processClock is this process's wall clock: time.Now. The fault suite's
// build (tag faultclock, clock_faultclock.go) offsets it instead, to run
// replicas whose clocks disagree.
func processClock(getenv func(string) string) (func() time.Time, error) { return time.Now, nil }

// sharedClock is the clock of everything that computes with shared state:
// Redis's clock as this replica reads it (corrected, skew.Monitor). The
// faultclock build can turn the correction off to show that the scripts
// alone keep leases and probes safe.
func sharedClock(getenv func(string) string, corrected, local func() time.Time) func() time.Time {
	return corrected
}
