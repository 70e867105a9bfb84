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
