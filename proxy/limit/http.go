package limit

import "net/http"

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
