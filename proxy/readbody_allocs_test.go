package proxy

import (
	"fmt"
	"net/http"
	"testing"
)

// TestIsMaxBytes: readBody's check for a body past max_request_bytes
// finds http.MaxBytesReader's error, wrapped or not, and costs a body
// read without an error no allocation.
func TestIsMaxBytes(t *testing.T) {
	if isMaxBytes(nil) || isMaxBytes(fmt.Errorf("read: %w", http.ErrBodyReadAfterClose)) {
		t.Error("isMaxBytes: true for another error")
	}
	if !isMaxBytes(fmt.Errorf("read: %w", &http.MaxBytesError{Limit: 10})) {
		t.Error("isMaxBytes: false for a wrapped *http.MaxBytesError")
	}
	if n := testing.AllocsPerRun(100, func() { _ = isMaxBytes(nil) }); n != 0 {
		t.Errorf("isMaxBytes(nil) allocates %v times, want 0", n)
	}
}
