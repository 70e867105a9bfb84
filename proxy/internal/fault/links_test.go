//go:build fault

package fault

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	proxyconfig "github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// stallLink is a TCP forwarder on a free loopback port to target whose
// traffic the test can hold (Stall) and release in order (Resume), as a
// congested or partitioned network does: TCP keeps the bytes and delivers
// them late, or never when a peer died meanwhile. (toxiproxy's toxics drop
// data or delay it chunk by chunk; none holds a stream and releases it.)
type stallLink struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	flow   chan struct{} // closed while bytes flow
	conns  []net.Conn
}

// newStallLink listens on a free loopback port and forwards every
// connection to target; it is closed when the test ends.
func newStallLink(t *testing.T, target string) *stallLink {
	t.Helper()
	return newStallLinkOn(t, "127.0.0.1:0", target)
}

// newStallLinkOn is newStallLink listening on addr.
func newStallLinkOn(t *testing.T, addr, target string) *stallLink {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	l := &stallLink{ln: ln, target: target, flow: make(chan struct{})}
	close(l.flow)
	go l.serve()
	t.Cleanup(l.close)
	return l
}

// Addr is the link's host:port; Port its port.
func (l *stallLink) Addr() string { return l.ln.Addr().String() }
func (l *stallLink) Port() int    { return l.ln.Addr().(*net.TCPAddr).Port }

// Stall holds every byte read from now on, both ways, until Resume.
func (l *stallLink) Stall() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.flow:
		l.flow = make(chan struct{})
	default:
	}
}

// Resume delivers what was held, in order, and lets bytes flow again.
func (l *stallLink) Resume() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.flow:
	default:
		close(l.flow)
	}
}

// Cut ends a stall as a partition ends whose far side died meanwhile:
// every connection is closed and what was held is never delivered; new
// connections flow again.
func (l *stallLink) Cut() {
	l.mu.Lock()
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	l.Resume()
}

func (l *stallLink) gate() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flow
}

func (l *stallLink) serve() {
	for {
		in, err := l.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", l.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		l.mu.Lock()
		l.conns = append(l.conns, in, out)
		l.mu.Unlock()
		go l.pipe(out, in)
		go l.pipe(in, out)
	}
}

// pipe copies src to dst, each chunk only while bytes flow; when either
// side ends, both are closed.
func (l *stallLink) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-l.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (l *stallLink) close() {
	_ = l.ln.Close()
	l.Resume()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		_ = c.Close()
	}
}

// runRedisNode starts redis-server on port with a data directory of the
// test (appendonly yes, appendfsync always, full syncs without delay) and
// extra arguments, and waits until it answers PING.
func runRedisNode(t *testing.T, name string, port int, extra ...string) *proctest.Process {
	t.Helper()
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", t.TempDir(),
		"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--protected-mode", "no",
		"--repl-diskless-sync-delay", "0"}, extra...)
	p := proctest.Start(t, name, "redis-server", args, os.Environ(), nil)
	waitPing(t, p, "127.0.0.1:"+strconv.Itoa(port))
	return p
}

// waitPing waits until the server at addr answers PING.
func waitPing(t *testing.T, p *proctest.Process, addr string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true, MaxRetries: -1})
	defer c.Close()
	end := time.Now().Add(proctest.StartupTimeout)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(end) {
			t.Fatalf("%s on %s did not answer PING:\n%s", p.Name, addr, p.Tail(20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sentinelGroup is three Redis Sentinels on loopback watching one primary
// as masterName.
type sentinelGroup struct {
	Addrs   []string
	clients []*redis.SentinelClient
}

// masterName is the name the Sentinels of the suite monitor the primary under.
const masterName = "callouts"

// startSentinels starts three Sentinels (quorum 2, primary down after
// 1 s) monitoring the primary on primaryPort, and waits until every one
// knows the other two and replicas replicas.
func startSentinels(t *testing.T, primaryPort, replicas int) *sentinelGroup {
	t.Helper()
	g := &sentinelGroup{}
	for i := range 3 {
		port := proctest.FreePort(t)
		dir := t.TempDir()
		conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nprotected-mode no\n"+
			"sentinel monitor %s 127.0.0.1 %d 2\nsentinel down-after-milliseconds %s 1000\n"+
			"sentinel failover-timeout %s 10000\nsentinel parallel-syncs %s 1\n",
			port, dir, masterName, primaryPort, masterName, masterName, masterName)
		path := filepath.Join(dir, "sentinel.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		p := proctest.Start(t, fmt.Sprintf("sentinel%d", i), "redis-server", []string{path, "--sentinel"}, os.Environ(), nil)
		waitPing(t, p, addr)
		c := redis.NewSentinelClient(&redis.Options{Addr: addr, DisableIdentity: true})
		t.Cleanup(func() { _ = c.Close() })
		g.Addrs = append(g.Addrs, addr)
		g.clients = append(g.clients, c)
	}
	end := time.Now().Add(60 * time.Second)
	for _, c := range g.clients {
		for {
			m, err := c.Master(context.Background(), masterName).Result()
			if err == nil && m["num-other-sentinels"] == "2" && m["num-slaves"] == strconv.Itoa(replicas) {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("Sentinels not ready after 60 s: %v %v", m, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return g
}

// master is the primary's host:port as the first Sentinel that answers
// reports it.
func (g *sentinelGroup) master() string {
	for _, c := range g.clients {
		if v, err := c.GetMasterAddrByName(context.Background(), masterName).Result(); err == nil && len(v) == 2 {
			return net.JoinHostPort(v[0], v[1])
		}
	}
	return ""
}

// waitMaster waits until the Sentinels report one of addrs as the primary.
func (g *sentinelGroup) waitMaster(t *testing.T, addrs []string, within time.Duration) {
	t.Helper()
	end := time.Now().Add(within)
	for !slices.Contains(addrs, g.master()) {
		if time.Now().After(end) {
			t.Fatalf("the Sentinels did not promote one of %v within %s (primary: %q)", addrs, within, g.master())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sentinelConfig is config() with its redis block replaced by one that
// reaches the primary through the Sentinels g, with durability level and
// its timeout.
func sentinelConfig(g *sentinelGroup, durability string, policy []string, endpoints ...string) string {
	const placeholder = "redis://sentinel.invalid:1/0"
	block := fmt.Sprintf("redis:\n  sentinel:\n    master_name: %s\n    addresses: [%s]\n  durability: %s\n",
		masterName, strings.Join(g.Addrs, ", "), durability)
	if durability != proxyconfig.DurabilityLocal {
		block += "  durability_timeout: 1s\n" // refused with local, which waits for nothing
	}
	return strings.Replace(config(placeholder, policy, endpoints...), "redis:\n  url: "+placeholder+"\n", block, 1)
}

// keyedLoad is the answers of a load of keyed asynchronous writes.
type keyedLoad struct {
	mu  sync.Mutex
	acc []accepted
	// codes counts answers by status ("err" for a transport error) and,
	// for problems, by status and problem code ("503 store-unavailable").
	codes map[string]int
	wg    sync.WaitGroup
}

// wait returns once every worker of the load has stopped.
func (l *keyedLoad) wait() { l.wg.Wait() }

// accepted returns the callouts answered 202 so far.
func (l *keyedLoad) accepted() []accepted {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]accepted(nil), l.acc...)
}

// count returns how many callouts were answered 202 so far.
func (l *keyedLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acc)
}

// runKeyedLoad sends keyed POSTs with Prefer: respond-async to endpoint
// ep from workers goroutines, worker w to bases[w % len(bases)] (keys
// prefix-0, prefix-1, …), until done reports true or deadline passes, and
// returns the answers.
func (c *client) runKeyedLoad(bases []string, ep, prefix string, workers int, deadline time.Duration, done func(l *keyedLoad) bool) *keyedLoad {
	l := c.startKeyedLoad(bases, ep, prefix, workers, deadline, done)
	l.wait()
	return l
}

// startKeyedLoad is runKeyedLoad without waiting: the load runs until
// done or the deadline; wait for it with keyedLoad.wait.
func (c *client) startKeyedLoad(bases []string, ep, prefix string, workers int, deadline time.Duration, done func(l *keyedLoad) bool) *keyedLoad {
	l := &keyedLoad{codes: map[string]int{}}
	var next atomic.Int64
	end := time.Now().Add(deadline)
	for w := range workers {
		base := bases[w%len(bases)]
		l.wg.Go(func() {
			for !done(l) && time.Now().Before(end) {
				i := next.Add(1) - 1
				key := fmt.Sprintf(`"%s-%d"`, prefix, i)
				status, _, body, err := c.do(http.MethodPost, base+"/callout/"+ep+"/v1/charges",
					http.Header{"Idempotency-Key": {key}, "Prefer": {"respond-async"},
						"Content-Type": {"application/json"}}, `{"n":`+strconv.FormatInt(i, 10)+`}`)
				label := strconv.Itoa(status)
				var doc struct{ ID, Type string }
				if err != nil {
					label = "err"
				} else if json.Unmarshal(body, &doc) == nil && doc.Type != "" {
					label += " " + doc.Type[strings.LastIndexAny(doc.Type, "/:")+1:]
				}
				l.mu.Lock()
				l.codes[label]++
				if err == nil && status == http.StatusAccepted && doc.ID != "" {
					l.acc = append(l.acc, accepted{ID: doc.ID, Key: key})
				}
				l.mu.Unlock()
			}
		})
	}
	return l
}

// missing returns the accepted callouts whose GET /v1/callouts/{id} on
// base answers 404, checking from 16 goroutines; any other failure fails
// the test.
func (c *client) missing(t *testing.T, base string, cs []accepted) []accepted {
	t.Helper()
	var (
		mu   sync.Mutex
		lost []accepted
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(cs); i = int(next.Add(1) - 1) {
				code, _, body, err := c.do(http.MethodGet, base+"/v1/callouts/"+cs[i].ID, nil, "")
				switch {
				case err != nil:
					t.Errorf("GET %s: %v", cs[i].ID, err)
				case code == http.StatusNotFound:
					mu.Lock()
					lost = append(lost, cs[i])
					mu.Unlock()
				case code != http.StatusOK:
					t.Errorf("GET %s = %d: %s", cs[i].ID, code, body)
				}
			}
		})
	}
	wg.Wait()
	return lost
}

// commandCalls is how many cmd commands ("wait", "waitaof") the Redis at
// addr ran (INFO commandstats); -1 when it cannot tell.
func commandCalls(addr, cmd string) int {
	c := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.Atoi(v[:strings.IndexByte(v+",", ',')])
			return n
		}
	}
	return 0
}
