// Command sizing measures what the proxy costs Redis and itself, for the
// runbook's Redis sizing and capacity model (deploy/README.md). It starts
// its own redis-server (no persistence) on a free loopback port, and:
//
//   - enqueues N pending callouts through proxy/redisstore and reads
//     used_memory and MEMORY USAGE (bytes per pending callout);
//   - runs the real callout-proxy binary against that Redis and a local
//     upstream, sends N reads, N synchronous keyed writes and N
//     respond-async keyed writes, and reads INFO commandstats, used_memory
//     and used_cpu around each (commands, Redis CPU and memory per
//     request), and the proxy's own CPU time and RSS from /proc.
//
// Every figure is net of the idle proxy's background work, measured for the
// same length of time first. Usage, from the repository root:
//
//	go run ./deploy/sizing -n 10000
//
// It prints a Markdown report on stdout. Loopback only; it stops what it
// started.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
)

func main() {
	if err := runMain(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sizing:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	// N is the requests per experiment through the proxy; Pending the
	// pending callouts per memory measurement.
	N, Pending  int
	Concurrency int
	Proxy       string
	RedisServer string
}

func runMain(ctx context.Context, args []string, stdout io.Writer) error {
	var o options
	fs := flag.NewFlagSet("sizing", flag.ContinueOnError)
	fs.IntVar(&o.N, "n", 10000, "requests per experiment through the proxy")
	fs.IntVar(&o.Pending, "pending", 10000, "pending callouts per memory measurement")
	fs.IntVar(&o.Concurrency, "c", 8, "concurrent clients sending requests")
	fs.StringVar(&o.Proxy, "proxy", "", "callout-proxy binary (default: go build ./cmd/callout-proxy into a temporary directory)")
	fs.StringVar(&o.RedisServer, "redis-server", "redis-server", "redis-server binary")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rep, err := measure(ctx, o)
	if err != nil {
		return err
	}
	rep.write(stdout)
	return nil
}

// report is everything measure found.
type report struct {
	Options  options
	Redis    string
	Pending  []pendingResult
	Idle     idle
	Loads    []loadResult
	RSSIdle  int64
	RSSAfter int64
}

// measure runs every measurement of the package comment.
func measure(ctx context.Context, o options) (*report, error) {
	dir, err := os.MkdirTemp("", "callout-sizing-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if o.Proxy == "" {
		if o.Proxy, err = buildProxy(ctx, dir); err != nil {
			return nil, err
		}
	}
	r, err := startRedis(ctx, o.RedisServer, dir)
	if err != nil {
		return nil, err
	}
	defer r.Stop()
	rep := &report{Options: o, Redis: r.Client.InfoMap(ctx, "server").Item("Server", "redis_version")}
	for _, body := range []int{0, 1024} {
		p, err := measurePending(ctx, r, o.Pending, body)
		if err != nil {
			return nil, err
		}
		rep.Pending = append(rep.Pending, p)
	}
	if err := rep.measureProxy(ctx, r, o, dir); err != nil {
		return nil, err
	}
	return rep, nil
}

// measureProxy runs the proxy experiments against r.
func (rep *report) measureProxy(ctx context.Context, r *redisServer, o options, dir string) error {
	if err := r.reset(ctx); err != nil {
		return err
	}
	up := upstream()
	defer up.Close()
	p, err := startProxy(ctx, o.Proxy, dir, r.Addr, up.URL)
	if err != nil {
		return err
	}
	defer p.Stop()
	// Warm up: open the proxy's Redis and upstream connections (each Redis
	// client connection costs used_memory) before anything is measured.
	if err := send(ctx, p, experiments()[0], 0, 20*o.Concurrency, o.Concurrency); err != nil {
		return err
	}
	time.Sleep(time.Second) // let the first gathering and dispatcher rounds pass
	rep.RSSIdle = rssBytes(p.Pid())
	if rep.Idle, err = measureIdle(ctx, r, p, 3*time.Second); err != nil {
		return err
	}
	store := redisstore.New(r.Client, redisstore.Options{})
	for _, e := range experiments() {
		res, err := run(ctx, r, p, store, e, o.N, o.Concurrency, rep.Idle)
		if err != nil {
			return err
		}
		if err := countSent(ctx, r, p, store, e, o.N, min(o.N, 1000), o.Concurrency, rep.Idle, &res); err != nil {
			return err
		}
		rep.Loads = append(rep.Loads, res)
	}
	rep.RSSAfter = rssBytes(p.Pid())
	return nil
}

// buildProxy builds ./cmd/callout-proxy (found from this file's module
// root) into dir, as deploy/build.sh does.
func buildProxy(ctx context.Context, dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "callout-proxy")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, "./cmd/callout-proxy")
	cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/callout-proxy: %v\n%s", err, b)
	}
	return out, nil
}

// moduleRoot walks up from the working directory to the directory holding
// go.mod with the proxy's module.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			len(b) > 0 && containsModule(string(b)) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of github.com/calloutproxy/callout-proxy above the working directory")
		}
		dir = parent
	}
}

func containsModule(gomod string) bool {
	const want = "module github.com/calloutproxy/callout-proxy\n"
	return len(gomod) >= len(want) && gomod[:len(want)] == want
}

// write prints the report as Markdown.
func (rep *report) write(w io.Writer) {
	fmt.Fprintf(w, "Redis %s, %s/%s, %d CPUs; %d pending callouts per memory figure; %d requests per experiment, %d concurrent clients\n\n",
		rep.Redis, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), rep.Options.Pending, rep.Options.N, rep.Options.Concurrency)
	fmt.Fprintln(w, "| pending callout (redisstore.Enqueue) | bytes each (used_memory delta / N) | record hash | idempotency reservation | body key |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, p := range rep.Pending {
		fmt.Fprintf(w, "| body %d bytes | %d | %d | %d | %d |\n", p.BodyBytes, p.PerCallout, p.Record, p.Reservation, p.Body)
	}
	fmt.Fprintf(w, "\nIdle proxy (1 replica, 1 endpoint): %.1f Redis commands/s (%s), Redis CPU %.4f s/s, proxy CPU %.4f s/s\n\n",
		rep.Idle.Total, commandList(rep.Idle.Commands), rep.Idle.RedisCPU, rep.Idle.ProxyCPU)
	fmt.Fprintln(w, "| request through the proxy | commands sent each | sent, by command | round trips each (socket reads) | commands executed each (scripts included) | Redis CPU µs each | proxy CPU µs each | Redis memory left, bytes each | requests/s here |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, l := range rep.Loads {
		fmt.Fprintf(w, "| %s | %.2f | %s | %.2f | %.2f | %.0f | %.0f | %d | %.0f |\n", l.Name, l.SentTotal, commandList(l.Sent),
			l.RoundTrips, l.Total, l.RedisCPU, l.ProxyCPU, l.Memory, float64(l.N)/l.Seconds)
	}
	fmt.Fprintln(w, "\nCommands executed, by command:")
	for _, l := range rep.Loads {
		fmt.Fprintf(w, "- %s: %s\n", l.Name, commandList(l.Commands))
	}
	fmt.Fprintf(w, "\nProxy RSS: %.1f MiB idle, %.1f MiB after the requests\n",
		float64(rep.RSSIdle)/(1<<20), float64(rep.RSSAfter)/(1<<20))
}
