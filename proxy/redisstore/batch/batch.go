// Package batch is the store's write batching: one writer goroutine that
// takes what concurrent callers hand it and writes it in one go (one Redis
// pipeline), so N callers cost about one round trip instead of N. It is a
// group commit: an item handed in while the writer is idle is written at
// once, alone, and what is handed in while a batch is being written goes,
// all of it, into the next one — so batching never makes a caller wait for
// company, only for the write before its own. The Completer of the core
// store (redisstore.NewCompleter) is its one user.
package batch

import (
	"context"
	"sync"
	"time"
)

// Options configure a Writer. The zero value works.
type Options struct {
	// MaxBatch is the most items in one batch. Default 256.
	MaxBatch int
	// Queue is how many items may wait for the writer; past it, Do waits
	// for room (or its context). Default 4096.
	Queue int
	// Timeout bounds the write of one batch (the context the write function
	// gets). Default 5 s.
	Timeout time.Duration
}

// Writer batches items of type T for one write function. It is safe for
// concurrent use.
type Writer[T any] struct {
	o     Options
	write func(ctx context.Context, batch []T)
	in    chan *item[T]
	done  chan struct{}
	mu    sync.RWMutex // held for reading while handing in; Close takes it to stop
	shut  bool
}

type item[T any] struct {
	v     T
	ready chan struct{}
}

// New returns a Writer that hands each batch to write (in the order the
// items were handed in, at most MaxBatch at a time, with a context bounded
// by Timeout) and starts its goroutine. write reports per-item results
// through the items themselves: the Writer knows nothing of them.
func New[T any](write func(ctx context.Context, batch []T), o Options) *Writer[T] {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.Queue <= 0 {
		o.Queue = 4096
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	w := &Writer[T]{o: o, write: write, in: make(chan *item[T], o.Queue), done: make(chan struct{})}
	go w.run()
	return w
}

// Do hands v to the writer and returns when the batch holding it has been
// written: true, nil. After Close it writes nothing and returns false, nil
// (the caller writes v itself, so nothing handed in at shutdown goes
// unwritten). Errors: ctx's, when it ends before v was written (v may still
// be written, as with any call cut short).
func (w *Writer[T]) Do(ctx context.Context, v T) (bool, error) {
	it := &item[T]{v: v, ready: make(chan struct{})}
	w.mu.RLock()
	if w.shut {
		w.mu.RUnlock()
		return false, nil
	}
	select {
	case w.in <- it:
		w.mu.RUnlock()
	case <-ctx.Done():
		w.mu.RUnlock()
		return true, ctx.Err()
	}
	select {
	case <-it.ready:
		return true, nil
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

// Close stops taking items, writes every one queued and stops the writer.
// It returns when they are written. Safe to call more than once.
func (w *Writer[T]) Close() {
	w.mu.Lock()
	if !w.shut {
		w.shut = true
		close(w.in)
	}
	w.mu.Unlock()
	<-w.done
}

// run is the writer goroutine: each batch is the first item it waits for
// and what is queued behind it then, up to MaxBatch.
func (w *Writer[T]) run() {
	defer close(w.done)
	var batch []*item[T]
	for first := range w.in {
		batch = append(batch[:0], first)
	fill:
		for len(batch) < w.o.MaxBatch {
			select {
			case it, ok := <-w.in:
				if !ok {
					break fill
				}
				batch = append(batch, it)
			default:
				break fill
			}
		}
		w.flush(batch)
	}
}

// flush writes batch and releases its callers.
func (w *Writer[T]) flush(batch []*item[T]) {
	ctx, cancel := context.WithTimeout(context.Background(), w.o.Timeout)
	defer cancel()
	vs := make([]T, len(batch))
	for i, it := range batch {
		vs[i] = it.v
	}
	w.write(ctx, vs)
	for _, it := range batch {
		close(it.ready)
	}
}

// Queued is how many items wait for the writer now (not counting the batch
// being written).
func (w *Writer[T]) Queued() int { return len(w.in) }
