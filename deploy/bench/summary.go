package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// summary prints, for each results file run.sh wrote (one JSON object a
// line), the figures BENCHMARKS.md's before/after table holds, one
// Markdown row per file:
//
//	bench summary results-before.jsonl results-after.jsonl
//
// The columns: the run's durability and commit; reads and keyed writes at
// the wrk peak as a ratio of the bare ReverseProxy's peak in the same run;
// the drain rate of two replicas (attempts/s); proxy and Redis CPU per
// dispatched attempt (µs: both replicas' process CPU since they started,
// plus Redis's CPU over the drain, over the attempts; the first 10 s are
// profiled, which costs a few per cent); Redis bytes per pending keyed
// callout of the drain seed (31-byte body: used_memory's delta over the
// callouts); and the p99 (ms) of the proxy and of the bare proxy at half the
// proxy's own vegeta peak, for reads and for keyed writes. A figure the
// file lacks (a phase not run) prints as "—". Errors: a file that cannot be
// read or a line that is not JSON.
func summary(files []string) error {
	if len(files) == 0 {
		return errors.New("summary: name one or more results files")
	}
	fmt.Println("| run | durability | reads ÷ bare (wrk) | keyed writes ÷ bare (wrk) | drain, 2 replicas (/s) | proxy + Redis CPU per attempt (µs) | Redis B per pending callout | read p99 at ½ proxy peak: proxy / bare (ms) | keyed-write p99 at ½ proxy peak: proxy / bare (ms) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, f := range files {
		r, err := readRun(f)
		if err != nil {
			return err
		}
		fmt.Printf("| %s %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f, r.commit, r.durability,
			ratio(r.wrk["proxy GET"], r.wrk["bare GET"]), ratio(r.wrk["proxy POST"], r.wrk["bare POST"]),
			figure(r.drain, "%.0f"), figure(r.cpuPerAttempt(), "%.0f"), figure(r.bytesPerCallout, "%.0f"),
			pair(r.p99["proxy GET"], r.p99["bare GET"]), pair(r.p99["proxy POST"], r.p99["bare POST"]))
	}
	return nil
}

// run holds one results file's figures; 0 is "not measured".
type run struct {
	durability, commit string
	wrk, p99           map[string]float64 // "TARGET METHOD": req/s; ms
	drain              float64            // attempts/s
	bytesPerCallout    float64
	clk                float64 // ticks a second
	redisStart         float64 // Redis's CPU ticks at the drain's start
	redisEnd, replicas float64 // at its end: Redis's, both replicas'
	attempts           float64
}

// cpuPerAttempt is the drain's proxy and Redis CPU per attempt in µs.
func (r run) cpuPerAttempt() float64 {
	if r.clk == 0 || r.attempts == 0 {
		return 0
	}
	return (r.redisEnd - r.redisStart + r.replicas) / r.clk / r.attempts * 1e6
}

func readRun(path string) (run, error) {
	f, err := os.Open(path)
	if err != nil {
		return run{}, err
	}
	defer f.Close()
	r := run{durability: "local", wrk: map[string]float64{}, p99: map[string]float64{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var l struct {
			Kind, Target, Method, Basis, Durability, Commit string
			Replicas                                        int
			ClkTck                                          float64 `json:"clk_tck"`
			Redis, Replica1, Replica2                       float64
			Result                                          struct {
				Method          string
				ThroughputRPS   float64 `json:"throughput_rps"`
				P99             float64 `json:"p99_ms"`
				AttemptsPerSec  float64 `json:"attempts_per_second"`
				Drained         float64
				BytesPerCallout float64 `json:"bytes_per_pending_callout"`
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return run{}, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		switch l.Kind {
		case "run":
			r.durability, r.commit = l.Durability, l.Commit
		case "wrk_peak":
			r.wrk[l.Target+" "+l.Method] = l.Result.ThroughputRPS
		case "fixed":
			if l.Basis == "half_proxy_peak" {
				r.p99[l.Target+" "+l.Result.Method] = l.Result.P99
			}
		case "seed":
			r.bytesPerCallout = l.Result.BytesPerCallout
		case "cpu_drain_start":
			r.redisStart = l.Redis
		case "drain":
			r.drain, r.attempts = l.Result.AttemptsPerSec, l.Result.Drained
		case "cpu_total":
			r.clk, r.redisEnd, r.replicas = l.ClkTck, l.Redis, l.Replica1+l.Replica2
		}
	}
	return r, sc.Err()
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f× (%.0f / %.0f)", a/b, a, b)
}

func pair(a, b float64) string {
	if a == 0 || b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f / %.1f", a, b)
}

func figure(v float64, format string) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf(format, v)
}
