//go:build hostile

package hostile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// Sizes of the attacks.
const (
	maxConnections = 2048     // limits.max_connections: the default
	bigBody        = 12 << 20 // max_request_bytes: the default
	bigResponse    = 11 << 20
)

// suite is the proxy under attack, its Redis and its upstreams.
type suite struct {
	p      *proctest.Proxy
	rdb    *redis.Client
	tokenA string
	flood  *counter // the flooded endpoint's upstream
}

// counter counts an upstream's requests by path.
type counter struct {
	mu   sync.Mutex
	hits map[string]int
}

func (c *counter) add(path string) {
	c.mu.Lock()
	c.hits[path]++
	c.mu.Unlock()
}

func (c *counter) get(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits[path]
}

// newSuite starts Redis, two upstreams and the proxy: default limits
// except read_header_timeout 3s, body_read_timeout 5s and write_timeout
// 5s, so the slow callers of the suite are cut within its time.
func newSuite(t *testing.T) *suite {
	rs := proctest.StartRedis(t, false)
	rdb, redisURL := rs.Client, rs.URL
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "pong")
	}))
	t.Cleanup(healthy.Close)
	flood := &counter{hits: map[string]int{}}
	big := bytes.Repeat([]byte("r"), bigResponse)
	floodSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		flood.add(r.URL.Path)
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", strconv.Itoa(len(big)))
			_, _ = w.Write(big)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(floodSrv.Close)
	cfg := proctest.Config{RedisURL: redisURL, Issuers: []string{orgA, orgB},
		Sections: "limits:\n  read_header_timeout: 3s\n  body_read_timeout: 5s\n  write_timeout: 5s\n",
		Endpoints: []string{proctest.Endpoint("healthy", healthy.URL, proctest.Loopback),
			proctest.Endpoint("flood", floodSrv.URL, proctest.Loopback)}}.YAML()
	p := proctest.StartProxy(t, proxyBinary, cfg, proxyOptions())
	return &suite{p: p, rdb: rdb, tokenA: bearer(t, orgA), flood: flood}
}

// settle waits until the proxy holds no request bytes (every answer
// written), at most 30 s.
func (s *suite) settle(t *testing.T) {
	t.Helper()
	end := time.Now().Add(30 * time.Second)
	for s.p.Metric(t, "callout_inflight_bytes") != 0 {
		if time.Now().After(end) {
			t.Fatalf("the proxy still holds %v bytes 30 s after the attack", s.p.Metric(t, "callout_inflight_bytes"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// redisGrowth runs attack and returns how much the keys of Redis grew.
func (s *suite) redisGrowth(t *testing.T, attack func()) int64 {
	t.Helper()
	before := redisBytes(t, s.rdb)
	attack()
	s.settle(t)
	return redisBytes(t, s.rdb) - before
}

// TestHostile replays the attacks one after another against
// one proxy, each under the monitor (watch).
func TestHostile(t *testing.T) {
	s := newSuite(t)
	t.Run("idle connections beyond the cap", s.idleConnections)
	t.Run("slow headers and slow bodies", s.slowCallers)
	t.Run("promised bodies without a token beyond the cap", s.promisedBodies)
	t.Run("1 MB headers x 400", s.hugeHeaders)
	t.Run("60 KiB headers x 400 keyed writes", s.largeHeaders)
	t.Run("12 MiB bodies x 80 concurrent", s.bigBodies)
	t.Run("11 MiB responses x 100 concurrent", s.bigResponses)
	t.Run("11 MiB responses x 100 never read", s.slowReaders)
}

// parallel runs n calls of f on at most workers goroutines.
func parallel(n, workers int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, workers) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(i)
			}
		})
	}
	wg.Wait()
}

// idleConnections opens max_connections + 500 connections that never send
// a request, or send one and stay idle (no token needed for /healthz):
// the proxy closes the oldest idle ones to make room, never holds more
// than its cap, and answers everyone else at once.
func (s *suite) idleConnections(t *testing.T) {
	w := watchProxy(t, s.p)
	const n = maxConnections + 500
	conns := make([]net.Conn, n)
	var failedDials atomic.Int64
	parallel(n, 64, func(i int) {
		c, err := net.DialTimeout("tcp", s.p.Addr, 5*time.Second)
		if err != nil {
			failedDials.Add(1)
			return
		}
		conns[i] = c
		if i%2 == 1 { // keep-alive idle: one request, then nothing
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err == nil {
				if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}
	})
	time.Sleep(2 * time.Second) // the attacker holds them; the monitor runs
	open := s.p.Metric(t, `callout_listener_connections{listener="callout"}`)
	evicted := s.p.Metric(t, `callout_listener_evictions_total{listener="callout"}`)
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
	w.finish(t)
	t.Logf("%d attacker connections (%d dials failed): %v open at the proxy, %v evicted", n,
		failedDials.Load(), open, evicted)
	if open > maxConnections+1 {
		t.Errorf("%v connections open at the proxy, cap %d", open, maxConnections)
	}
	if evicted < 500 {
		t.Errorf("%v idle connections evicted, want at least the 500 beyond the cap", evicted)
	}
}

// promisedBodies opens max_connections + 200 connections that send a
// request header promising a body, no token, and two bytes of it, then
// nothing: each is refused 401 at once with its connection closed (not
// after limits.body_read_timeout, which net/http would spend reading the
// unread body), so they never fill the cap and everyone else is answered.
func (s *suite) promisedBodies(t *testing.T) {
	w := watchProxy(t, s.p)
	const n = maxConnections + 200
	var refused, other atomic.Int64
	parallel(n, 128, func(i int) {
		c, err := dial(s.p.Addr, 10*time.Second) // longer than the proxy's body deadline here
		if err != nil {
			other.Add(1)
			return
		}
		defer c.Close()
		head := "POST /callout/flood/promised-" + strconv.Itoa(i) + " HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nab"
		if _, err := io.WriteString(c, head); err != nil {
			other.Add(1)
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			other.Add(1)
			return
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized && resp.Close {
			refused.Add(1)
		} else {
			other.Add(1)
		}
	})
	w.finish(t)
	t.Logf("promised bodies without a token: %d/%d refused 401 at once with the connection closed; other %d",
		refused.Load(), n, other.Load())
	if refused.Load() != n {
		t.Errorf("%d/%d refused at once (other %d)", refused.Load(), n, other.Load())
	}
}

// slowCallers sends 300 request headers a line every 200 ms and 300 bodies
// 100 bytes every 200 ms: read_header_timeout closes the first, the body
// read deadline answers the second 408; nothing slow reaches the upstream.
func (s *suite) slowCallers(t *testing.T) {
	w := watchProxy(t, s.p)
	const n = 300
	var headersCut, bodies408, other atomic.Int64
	var wg sync.WaitGroup
	for i := range 2 * n {
		wg.Go(func() {
			c, err := dial(s.p.Addr, 20*time.Second)
			if err != nil {
				other.Add(1)
				return
			}
			defer c.Close()
			answered := make(chan *http.Response, 1)
			go func() {
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					resp = nil
				}
				answered <- resp
			}()
			slowBody := i%2 == 1
			var head string
			if slowBody {
				head = "PUT /callout/flood/slow HTTP/1.1\r\nHost: x\r\nAuthorization: " + s.tokenA +
					"\r\nIdempotency-Key: slow-" + strconv.Itoa(i) + "\r\nContent-Length: 1048576\r\n\r\n"
			} else {
				head = "GET /healthz HTTP/1.1\r\nHost: x\r\n"
			}
			if _, err := io.WriteString(c, head); err != nil {
				other.Add(1)
				return
			}
			for range 75 { // 15 s at most
				select {
				case resp := <-answered:
					switch {
					case slowBody && resp != nil && resp.StatusCode == http.StatusRequestTimeout:
						bodies408.Add(1)
					case !slowBody && resp == nil:
						headersCut.Add(1)
					default:
						other.Add(1)
					}
					return
				case <-time.After(200 * time.Millisecond):
				}
				chunk := "X-Slow: a\r\n"
				if slowBody {
					chunk = strings.Repeat("b", 100)
				}
				if _, err := io.WriteString(c, chunk); err != nil {
					if resp := <-answered; slowBody && resp != nil && resp.StatusCode == http.StatusRequestTimeout {
						bodies408.Add(1)
					} else if !slowBody && resp == nil {
						headersCut.Add(1)
					} else {
						other.Add(1)
					}
					return
				}
			}
			other.Add(1) // never cut
		})
	}
	wg.Wait()
	w.finish(t)
	t.Logf("slow headers cut: %d/%d; slow bodies answered 408: %d/%d; other: %d",
		headersCut.Load(), n, bodies408.Load(), n, other.Load())
	if headersCut.Load() != n || bodies408.Load() != n {
		t.Errorf("slow headers cut %d/%d, slow bodies 408 %d/%d (other %d)", headersCut.Load(), n,
			bodies408.Load(), n, other.Load())
	}
	if got := s.flood.get("/slow"); got != 0 {
		t.Errorf("%d slow bodies reached the upstream", got)
	}
}

// hugeHeaders sends 400 requests at once, each with a valid token and a
// 1 MB header field: net/http refuses them past twice max_header_bytes
// (431, connection closed) before the proxy holds them; none is forwarded
// and Redis does not grow.
func (s *suite) hugeHeaders(t *testing.T) {
	w := watchProxy(t, s.p)
	big := strings.Repeat("h", 1<<20)
	var ok, refused atomic.Int64
	growth := s.redisGrowth(t, func() {
		parallel(400, 400, func(i int) {
			c, err := dial(s.p.Addr, 20*time.Second)
			if err != nil {
				refused.Add(1)
				return
			}
			defer c.Close()
			go func() {
				_, _ = io.WriteString(c, "PUT /callout/flood/huge HTTP/1.1\r\nHost: x\r\nAuthorization: "+s.tokenA+
					"\r\nIdempotency-Key: huge-"+strconv.Itoa(i)+"\r\nX-Big: "+big+"\r\nContent-Length: 2\r\n\r\n{}")
			}()
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err == nil && resp.StatusCode < 300 {
				ok.Add(1)
				return
			}
			refused.Add(1) // 431, or reset before it could be read
		})
	})
	w.finish(t)
	t.Logf("1 MB headers: %d refused, %d accepted; Redis grew %d KiB", refused.Load(), ok.Load(), growth>>10)
	if ok.Load() != 0 || s.flood.get("/huge") != 0 {
		t.Errorf("%d requests with 1 MB headers accepted, %d forwarded", ok.Load(), s.flood.get("/huge"))
	}
	if growth > 1<<20 {
		t.Errorf("Redis grew %d KiB for refused requests", growth>>10)
	}
}

// largeHeaders sends 400 keyed writes at once whose headers are just under
// max_header_bytes (60 KiB): they are accepted and recorded, and Redis
// grows by what a finished record keeps — what replay needs, not the
// request: under 8 KiB each.
func (s *suite) largeHeaders(t *testing.T) {
	w := watchProxy(t, s.p)
	header := strings.Repeat("l", 60<<10)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 100, Proxy: nil}}
	var statuses sync.Map
	growth := s.redisGrowth(t, func() {
		parallel(400, 100, func(i int) {
			req, _ := http.NewRequest(http.MethodPut, s.p.URL+"/callout/flood/large", strings.NewReader("{}"))
			req.Header.Set("Authorization", s.tokenA)
			req.Header.Set("Idempotency-Key", "large-"+strconv.Itoa(i))
			req.Header.Set("X-Large", header)
			code := 0
			if resp, err := client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				code = resp.StatusCode
			}
			n, _ := statuses.LoadOrStore(code, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		})
	})
	client.CloseIdleConnections()
	w.finish(t)
	counts := map[int]int64{}
	statuses.Range(func(k, v any) bool { counts[k.(int)] = v.(*atomic.Int64).Load(); return true })
	t.Logf("60 KiB headers x 400 keyed writes: statuses %v; Redis grew %d KiB (%d bytes per write)",
		counts, growth>>10, growth/400)
	if counts[http.StatusOK] != 400 {
		t.Errorf("statuses %v, want 400 x 200", counts)
	}
	// A finished keyed write keeps what replay needs (fingerprint, status,
	// the response, timestamps), not its 60 KiB of headers.
	if growth > 400*(8<<10) {
		t.Errorf("Redis grew %d KiB for 400 finished writes, over 8 KiB each", growth>>10)
	}
}

// bigBodies sends 80 keyed 12 MiB writes at once: the memory budget lets
// through what fits and answers the rest 503 overloaded with Retry-After;
// RSS stays bounded; finished records keep no request, so
// Redis grows by a few KiB per accepted write.
func (s *suite) bigBodies(t *testing.T) {
	w := watchProxy(t, s.p)
	body := bytes.Repeat([]byte("B"), bigBody)
	var ok, overloaded, storeSlow, other atomic.Int64
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 80, Proxy: nil}}
	growth := s.redisGrowth(t, func() {
		parallel(80, 80, func(i int) {
			req, _ := http.NewRequest(http.MethodPut, s.p.URL+"/callout/flood/big-write", bytes.NewReader(body))
			req.Header.Set("Authorization", s.tokenA)
			req.Header.Set("Idempotency-Key", "big-"+strconv.Itoa(i))
			resp, err := client.Do(req)
			if err != nil {
				other.Add(1)
				t.Logf("write %d: %v", i, err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusOK:
				ok.Add(1)
			case resp.StatusCode == http.StatusServiceUnavailable && isProblem(b, "overloaded") &&
				resp.Header.Get("Retry-After") != "":
				overloaded.Add(1)
			case resp.StatusCode == http.StatusServiceUnavailable && isProblem(b, "store-unavailable"):
				// Redis took longer than the store timeout (2 s) to take
				// 12 MiB arguments on a loaded machine: the flooder is
				// refused, the record may exist (an ambiguous timeout).
				storeSlow.Add(1)
			default:
				other.Add(1)
				t.Logf("write %d: %d %s", i, resp.StatusCode, b[:min(len(b), 200)])
			}
		})
	})
	client.CloseIdleConnections()
	w.finish(t)
	stored := ok.Load() + storeSlow.Load() // recorded, or maybe recorded
	t.Logf("12 MiB x 80: %d accepted, %d overloaded, %d store-unavailable, %d other; Redis grew %d KiB "+
		"(%d bytes per stored write)", ok.Load(), overloaded.Load(), storeSlow.Load(), other.Load(), growth>>10,
		growth/max(1, stored))
	if other.Load() != 0 || ok.Load() == 0 {
		t.Errorf("%d accepted, %d overloaded, %d other: want only 200s and 503 overloaded", ok.Load(),
			overloaded.Load(), other.Load())
	}
	// A finished keyed write keeps what replay needs, not its 12 MiB
	// request: a few KiB. A write refused store-unavailable
	// may be recorded and pending until its lease expires: its request is
	// kept while it lives (jemalloc rounds 12 MiB to a 14 MiB class).
	if limit := ok.Load()*(16<<10) + storeSlow.Load()*(16<<20) + 1<<20; growth > limit {
		t.Errorf("Redis grew %d KiB for %d finished and %d maybe-pending writes, over %d KiB", growth>>10,
			ok.Load(), storeSlow.Load(), limit>>10)
	}
}

// bigResponses makes 100 reads of an 11 MiB response at once: responses
// are held in the budget too, so what does not fit is 503 overloaded and
// RSS stays bounded; reads store nothing in Redis.
func (s *suite) bigResponses(t *testing.T) {
	w := watchProxy(t, s.p)
	var ok, overloaded, other atomic.Int64
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 100, Proxy: nil}}
	growth := s.redisGrowth(t, func() {
		parallel(100, 100, func(i int) {
			req, _ := http.NewRequest(http.MethodGet, s.p.URL+"/callout/flood/big", nil)
			req.Header.Set("Authorization", s.tokenA)
			resp, err := client.Do(req)
			if err != nil {
				other.Add(1)
				return
			}
			// Count the 11 MiB rather than keep them: the suite's own
			// garbage would compete with the proxy for the machine.
			var b []byte
			var n int64
			if resp.StatusCode == http.StatusOK {
				n, _ = io.Copy(io.Discard, resp.Body)
			} else {
				b, _ = io.ReadAll(resp.Body)
				n = int64(len(b))
			}
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusOK && n == bigResponse:
				ok.Add(1)
			case resp.StatusCode == http.StatusServiceUnavailable && isProblem(b, "overloaded"):
				overloaded.Add(1)
			default:
				other.Add(1)
				t.Logf("read %d: %d, %d bytes", i, resp.StatusCode, n)
			}
		})
	})
	client.CloseIdleConnections()
	w.finish(t)
	t.Logf("11 MiB responses x 100: %d whole, %d overloaded, %d other; Redis grew %d KiB", ok.Load(),
		overloaded.Load(), other.Load(), growth>>10)
	if other.Load() != 0 || ok.Load() == 0 {
		t.Errorf("%d whole, %d overloaded, %d other: want only whole answers and 503 overloaded", ok.Load(),
			overloaded.Load(), other.Load())
	}
	if growth > 4<<20 {
		t.Errorf("Redis grew %d KiB for reads", growth>>10)
	}
}

// isProblem reports a proxy problem document of the given code.
func isProblem(body []byte, code string) bool {
	var pb struct{ Type string }
	return json.Unmarshal(body, &pb) == nil && pb.Type == "urn:callout-proxy:problem:"+code
}

// slowReaders asks for the 11 MiB answer on 100 connections whose receive
// buffer is 4 KiB and reads nothing until the proxy holds no more bytes:
// write_timeout closes the stalled answers and frees what they held in the
// budget (those past the budget were answered 503 overloaded at once);
// everyone else is answered meanwhile.
func (s *suite) slowReaders(t *testing.T) {
	w := watchProxy(t, s.p)
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conns := make([]net.Conn, 100)
	parallel(len(conns), len(conns), func(i int) {
		c, err := d.Dial("tcp", s.p.Addr)
		if err != nil {
			return
		}
		conns[i] = c
		_, _ = io.WriteString(c, "GET /callout/flood/big HTTP/1.1\r\nHost: x\r\nAuthorization: "+s.tokenA+"\r\n\r\n")
	})
	for end := time.Now().Add(5 * time.Second); s.p.Metric(t, "callout_inflight_bytes") == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("no answer was ever held")
		}
	}
	s.settle(t) // nothing read yet: only write_timeout can free the budget
	var cut, overloaded, delivered atomic.Int64
	parallel(len(conns), len(conns), func(i int) {
		c := conns[i]
		if c == nil {
			return
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		var head [12]byte
		n, _ := io.ReadFull(c, head[:])
		rest, _ := io.Copy(io.Discard, c)
		switch {
		case n == len(head) && string(head[9:12]) == "503":
			overloaded.Add(1)
		case int64(n)+rest >= bigResponse:
			delivered.Add(1)
		default:
			cut.Add(1)
		}
	})
	w.finish(t)
	t.Logf("11 MiB answers never read: %d cut by write_timeout, %d overloaded, %d delivered whole",
		cut.Load(), overloaded.Load(), delivered.Load())
	if delivered.Load() != 0 || cut.Load() == 0 {
		t.Errorf("%d stalled answers were kept for callers that did not read, %d cut", delivered.Load(), cut.Load())
	}
}
