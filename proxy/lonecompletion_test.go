package proxy

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/batch"
)

// TestLoneCompletionIsNotHeld: the completion writer (batch.Writer, the
// Completer's, as the app builds it) writes a completion handed in while it
// is idle at once, alone: in a synctest bubble no time passes between Do
// and the write, so no linger or timer holds a lone synchronous write for
// company; a second completion after it goes alone too.
func TestLoneCompletionIsNotHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sizes []int
		var at []time.Time
		w := batch.New(func(_ context.Context, b []int) {
			sizes = append(sizes, len(b))
			at = append(at, time.Now())
		}, batch.Options{})
		defer w.Close()
		for i := range 2 {
			start := time.Now()
			if handed, err := w.Do(context.Background(), i); !handed || err != nil {
				t.Fatalf("Do(%d) = %v, %v", i, handed, err)
			}
			if waited := time.Since(start); waited != 0 {
				t.Errorf("completion %d returned after %s, want at once", i, waited)
			}
			if got := at[i].Sub(start); got != 0 {
				t.Errorf("completion %d written %s after it was handed in, want at once", i, got)
			}
		}
		if len(sizes) != 2 || sizes[0] != 1 || sizes[1] != 1 {
			t.Fatalf("batches of %v, want two of one", sizes)
		}
	})
}
