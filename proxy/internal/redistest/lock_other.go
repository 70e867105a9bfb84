//go:build !unix

package redistest

import "testing"

// lock is a no-op where flock(2) is missing: run real-Redis tests with -p 1.
func lock(t testing.TB, target string) {}
