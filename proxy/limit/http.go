package limit

import (
	"io"
	"net/http"
)

// CloseAfterTransferEncoding closes the connection after answering any
// request that came with Transfer-Encoding. RFC 9112 §6.3: a request with
// both Transfer-Encoding and Content-Length "might indicate an attempt to
// perform request smuggling"; the server may process it by the
// Transfer-Encoding alone, but "MUST close the connection after
// responding". net/http does the first (it drops the Content-Length) but
// keeps the connection open, and since it drops the field before any
// handler runs, the two cases cannot be told apart in a handler: every request
// with Transfer-Encoding is answered, then its connection closed. Callers
// that send Content-Length (Apex always does) keep their connections.
func CloseAfterTransferEncoding(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TransferEncoding) > 0 {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// CloseIfBodyUnread closes the connection after answering a request whose
// body the handler did not read to its end — a refusal before the body is
// read (401, 404, 405, 431, …) or a body over its maximum. net/http would
// otherwise read up to 256 KiB of the unread body before it writes the
// answer, to keep the connection for another request; a caller that sends
// a header promising a body and then nothing holds the handler, the
// connection and its answer for the whole limits.body_read_timeout, and
// enough such connections (no token needed) fill the connection cap, since
// connections running a request are never evicted. With `Connection: close`
// set (RFC 9112 §9.6), net/http answers at once and drops the unread rest.
func CloseIfBodyUnread(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		b := &eofBody{ReadCloser: r.Body}
		r.Body = b
		next.ServeHTTP(&beforeAnswer{ResponseWriter: w, before: func() {
			if !b.eof {
				w.Header().Set("Connection", "close")
			}
		}}, r)
	})
}

// eofBody records whether its reader reached the end.
type eofBody struct {
	io.ReadCloser
	eof bool
}

func (b *eofBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// beforeAnswer calls before once, just before the final answer starts: at
// the first WriteHeader with a status of 200 or more (1xx answers are
// interim) or the first Write, whichever comes first.
type beforeAnswer struct {
	http.ResponseWriter
	before  func()
	started bool
}

func (w *beforeAnswer) start() {
	if !w.started {
		w.started = true
		w.before()
	}
}

func (w *beforeAnswer) WriteHeader(code int) {
	if code >= 200 {
		w.start()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *beforeAnswer) Write(p []byte) (int, error) {
	w.start()
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *beforeAnswer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
