package batch

import (
	"context"
	"runtime"
	"sync"
	"testing"
)

// What callers hand in while a batch is being written goes into the next
// batch, all of it, in order (group commit); the first, handed in while the
// writer was idle, was written alone at once (the write function started
// before anyone else came); after Close, Do writes nothing and says so.
func TestWriterBatchesWhileWriting(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	var mu sync.Mutex
	var batches [][]int
	w := New(func(_ context.Context, b []int) {
		mu.Lock()
		batches = append(batches, append([]int(nil), b...))
		first := len(batches) == 1
		mu.Unlock()
		if first {
			started <- struct{}{}
			<-release
		}
	}, Options{})
	var wg sync.WaitGroup
	wg.Go(func() { mustDo(t, w, 0) })
	<-started
	for i := 1; i <= 5; i++ {
		wg.Go(func() { mustDo(t, w, i) })
	}
	for w.Queued() < 5 { // the five callers hand in while the first batch is held
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	w.Close()
	if len(batches) != 2 || len(batches[0]) != 1 || len(batches[1]) != 5 {
		t.Fatalf("batches %v, want [0] then the five others in one", batches)
	}
	if handed, err := w.Do(t.Context(), 9); handed || err != nil {
		t.Fatalf("Do after Close = %v, %v; want false, nil", handed, err)
	}
	w.Close() // twice is fine
}

func mustDo(t *testing.T, w *Writer[int], v int) {
	if handed, err := w.Do(context.Background(), v); !handed || err != nil {
		t.Errorf("Do(%d) = %v, %v", v, handed, err)
	}
}
