package limit

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"
)

// BodyDeadline gives every request with a body d to deliver it
// (limits.body_read_timeout): it sets the connection's read deadline when
// the handler starts and clears it once the body has been read to its end,
// so the deadline never outlives the body (a read deadline left on the
// connection would cancel the request's context while its handler waits
// for an upstream). A body read past the deadline fails with an error for
// which IsTimeout reports true; the handler answers 408 and the connection
// is closed. Requests without a body, d ≤ 0, and connections that cannot
// take deadlines pass untouched. The same deadline bounds what net/http
// discards of a body the handler left unread.
func BodyDeadline(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d <= 0 || r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			next.ServeHTTP(w, r)
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody clears the connection's read deadline at the body's end.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// IsTimeout reports whether err is a read that ran past a deadline. A nil
// err is none, without the errors.As target (it escapes: 2 allocations),
// so a successful read's checks cost nothing.
func IsTimeout(err error) bool {
	if err == nil {
		return false
	}
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

// ErrTooLarge is what ReadBody returns for a body over its maximum.
var ErrTooLarge = errors.New("limit: body larger than its maximum")

// firstChunk is the first reservation of a body being read; wholeAfter
// is where a body of known length stops doubling and takes its whole
// length (the doubling copies are garbage until the next GC).
const (
	firstChunk = 32 << 10
	wholeAfter = 1 << 20
)

// ReadBody reads r whole — a request body of contentLength bytes, −1 when
// unknown (chunked) — reserving its buffer in h as it grows, so the budget
// counts only bytes that have arrived (a caller trickling a large body
// holds what it sent, not what it announced): the buffer doubles from 32
// KiB, and a body of known length takes its whole length once 512 KiB of
// it arrived (so its doubling leaves at most 1 MiB of garbage); one of
// unknown length doubles up to maxBytes+1. Each growth is reserved first
// (waiting under ctx and the budget's wait). Errors: ErrTooLarge when
// contentLength or the bytes read pass maxBytes; ErrOverloaded; the read error
// (a timeout: IsTimeout). The buffer reserved stays in h until the caller
// releases it (the whole capacity: it is memory held, used or not).
func ReadBody(ctx context.Context, h *Holder, r io.Reader, contentLength, maxBytes int64) ([]byte, error) {
	return ReadBodyBy(ctx, time.Time{}, h, r, contentLength, maxBytes)
}

// ReadBodyBy is ReadBody whose reservations also stop waiting for room at
// deadline (zero: none; Holder.AcquireBy), so the ingress bounds its waits
// by limits.overload_wait without a context of its own. The read itself is
// bounded by ctx and the connection's deadline, not by deadline.
func ReadBodyBy(ctx context.Context, deadline time.Time, h *Holder, r io.Reader, contentLength, maxBytes int64) ([]byte, error) {
	if contentLength > maxBytes {
		return nil, ErrTooLarge
	}
	if contentLength == 0 {
		return readEmpty(r)
	}
	target := maxBytes + 1
	if contentLength > 0 {
		target = contentLength
	}
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			next := min(target, max(firstChunk, 2*int64(cap(buf))))
			if contentLength > 0 && next >= wholeAfter {
				next = target // it keeps coming: take the announced length at once
			}
			if next <= int64(cap(buf)) { // read target bytes: only EOF may follow
				if _, err := readEmpty(r); err != nil {
					return nil, err
				}
				return buf, nil
			}
			if err := h.AcquireBy(ctx, deadline, next-int64(cap(buf))); err != nil {
				return nil, err
			}
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case int64(len(buf)) > maxBytes:
			return nil, ErrTooLarge
		case errors.Is(err, io.EOF):
			return buf, nil
		case err != nil:
			return nil, err
		}
	}
}

// readEmpty reads r to its end, expecting nothing more: a body longer than
// announced is ErrTooLarge.
func readEmpty(r io.Reader) ([]byte, error) {
	var one [1]byte
	n, err := io.ReadFull(r, one[:])
	switch {
	case n > 0:
		return nil, ErrTooLarge
	case errors.Is(err, io.EOF):
		return nil, nil
	}
	return nil, err
}

// WriteDeadline gives every response d to reach the caller
// (limits.write_timeout), from when the handler starts writing it: a caller
// that stops reading (a slow-read attack, or a hung client) cannot hold the
// handler, its connection and the response bytes in the memory budget for
// longer. Past it the write fails and the connection is closed. The
// deadline is set at the first WriteHeader or Write, so a handler that
// waits for an upstream before answering is not cut; d ≤ 0 sets none.
func WriteDeadline(d time.Duration, next http.Handler) http.Handler {
	if d <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&beforeAnswer{ResponseWriter: w, before: func() {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
		}}, r)
	})
}
