package main

import (
	"flag"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
)

// upstream serves the fast upstream: every request is answered 200 with
// an 11-byte JSON body after its body is read.
func upstream(args []string) error {
	fs := flag.NewFlagSet("upstream", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:9100", "listen address")
	_ = fs.Parse(args)
	return http.ListenAndServe(*listen, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
}

// bare serves the baseline: a bare httputil.ReverseProxy (no auth, no
// store) to -to, with an idle pool as large as the proxy's.
func bare(args []string) error {
	fs := flag.NewFlagSet("bare", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:9200", "listen address")
	to := fs.String("to", "http://127.0.0.1:9100", "upstream base URL")
	_ = fs.Parse(args)
	u, err := url.Parse(*to)
	if err != nil {
		return err
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 256}
	return http.ListenAndServe(*listen, rp)
}
