//go:build faultclock

package main

import (
	"fmt"
	"time"
)

// envFaultClockOffset is read only by a build with the faultclock tag: a Go
// duration ("90s", "-90s") added to every reading of the process's wall
// clock. Go reads the clock through the vDSO, so libfaketime cannot skew a
// Go binary; the fault suite's skew case builds the binary with this tag.
const envFaultClockOffset = "CALLOUT_FAULT_CLOCK_OFFSET"

// envFaultClockUncorrected, "1" in a faultclock build, makes the replica
// compute with its own (offset) clock instead of its reading of Redis's:
// the worst case, a replica before its first skew measurement, where only
// the scripts' TIME keeps shared state right.
const envFaultClockUncorrected = "CALLOUT_FAULT_CLOCK_UNCORRECTED"

// processClock is time.Now offset by CALLOUT_FAULT_CLOCK_OFFSET (none when
// unset). Error: an offset that is not a Go duration.
func processClock(getenv func(string) string) (func() time.Time, error) {
	v := getenv(envFaultClockOffset)
	if v == "" {
		return time.Now, nil
	}
	off, err := time.ParseDuration(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envFaultClockOffset, err)
	}
	return func() time.Time { return time.Now().Add(off) }, nil
}

// sharedClock is corrected, unless CALLOUT_FAULT_CLOCK_UNCORRECTED is "1":
// then the offset process clock itself.
func sharedClock(getenv func(string) string, corrected, local func() time.Time) func() time.Time {
	if getenv(envFaultClockUncorrected) == "1" {
		return local
	}
	return corrected
}
