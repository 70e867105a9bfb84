//go:build unix

package redistest

import (
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lockTimeout bounds the wait for another test process to finish with the
// same real Redis.
const lockTimeout = 5 * time.Minute

// lock takes an exclusive flock(2) on a file named after target in the
// temporary directory and releases it when the test ends, so tests in
// different processes never FLUSHALL each other's data. The holder writes
// its pid into the file: a second lock attempt from the same process (a
// nested Backends call, or t.Parallel tests) fails at once instead of
// waiting for itself.
func lock(t testing.TB, target string) {
	t.Helper()
	h := fnv.New64a()
	_, _ = h.Write([]byte(target))
	name := filepath.Join(os.TempDir(), "callout-redistest-"+strconv.FormatUint(h.Sum64(), 16)+".lock")
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("redistest: lock file: %v", err)
	}
	me := strconv.Itoa(os.Getpid())
	deadline, ownSeen := time.Now().Add(lockTimeout), 0
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if holder, _ := os.ReadFile(name); strings.TrimSpace(string(holder)) == me {
			ownSeen++ // re-check: a new holder may not have written its pid yet
		}
		if err != syscall.EWOULDBLOCK || time.Now().After(deadline) || ownSeen > 5 {
			_ = f.Close()
			t.Fatalf("redistest: lock %s for %s: %v (held by this process: a nested Backends call or t.Parallel tests? %v)",
				name, target, err, ownSeen > 5)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(me), 0)
	}
	t.Cleanup(func() {
		_ = f.Truncate(0)
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	})
}
