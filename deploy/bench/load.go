package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// result is what load prints: requests per second achieved, latency
// percentiles in milliseconds, and the share of 2xx answers.
type result struct {
	URL        string  `json:"url"`
	Method     string  `json:"method"`
	Rate       int     `json:"rate"` // requested per second; 0: as fast as -workers allow
	Throughput float64 `json:"throughput_rps"`
	P50ms      float64 `json:"p50_ms"`
	P90ms      float64 `json:"p90_ms"`
	P99ms      float64 `json:"p99_ms"`
	Success    float64 `json:"success_ratio"`
	Requests   uint64  `json:"requests"`
	// CPUSeconds is the load generator's own user+system CPU time.
	CPUSeconds float64 `json:"load_generator_cpu_s"`
}

// load attacks -url with vegeta for -duration at -rate (0: peak, with
// -workers concurrent connections) and prints a result. POSTs carry a
// fresh Idempotency-Key each and a 31-byte JSON body; -header adds headers
// to every request.
func load(args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	u := fs.String("url", "", "target URL")
	method := fs.String("method", "GET", "GET or POST")
	rate := fs.Int("rate", 0, "requests per second; 0: peak")
	dur := fs.Duration("duration", 10*time.Second, "attack duration")
	workers := fs.Uint64("workers", 64, "connections for a peak run")
	token := fs.String("token", "", "bearer token")
	var extra []string
	fs.Func("header", `extra request header "Name: value" (repeatable), e.g. "Prefer: respond-async"`,
		func(v string) error {
			if !strings.Contains(v, ":") {
				return fmt.Errorf("header %q: want Name: value", v)
			}
			extra = append(extra, v)
			return nil
		})
	_ = fs.Parse(args)
	var seq atomic.Int64
	run := time.Now().UnixNano()
	targeter := func(t *vegeta.Target) error {
		t.Method, t.URL = *method, *u
		t.Header = http.Header{}
		if *token != "" {
			t.Header.Set("Authorization", "Bearer "+*token)
		}
		for _, h := range extra {
			name, value, _ := strings.Cut(h, ":")
			t.Header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
		}
		if *method == http.MethodPost {
			t.Header.Set("Content-Type", "application/json")
			t.Header.Set("Idempotency-Key", fmt.Sprintf(`"b%d-%d"`, run, seq.Add(1)))
			t.Body = []byte(`{"amount":100,"currency":"EUR"}`)
		}
		return nil
	}
	opts := []func(*vegeta.Attacker){vegeta.KeepAlive(true), vegeta.Connections(int(*workers))}
	pacer := vegeta.Rate{Freq: *rate, Per: time.Second}
	if *rate == 0 {
		opts = append(opts, vegeta.Workers(*workers), vegeta.MaxWorkers(*workers))
	} else {
		opts = append(opts, vegeta.MaxWorkers(4096))
	}
	var m vegeta.Metrics
	for res := range vegeta.NewAttacker(opts...).Attack(targeter, pacer, *dur, "bench") {
		m.Add(res)
	}
	m.Close()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return json.NewEncoder(os.Stdout).Encode(result{URL: *u, Method: *method, Rate: *rate,
		Throughput: m.Throughput, P50ms: ms(m.Latencies.P50), P90ms: ms(m.Latencies.P90),
		P99ms: ms(m.Latencies.P99), Success: m.Success, Requests: m.Requests, CPUSeconds: cpuSeconds()})
}

// cpuSeconds is this process's user+system CPU time so far (getrusage).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
