// Command bench is the benchmark harness (BENCHMARKS.md): a
// fast upstream, a bare net/http/httputil.ReverseProxy baseline, a vegeta
// load driver, and the asynchronous-drain seeder and timer. deploy/bench/run.sh
// runs it; every subcommand prints one JSON object on stdout.
//
//	bench upstream -listen ADDR            answers 200 {"ok":true}
//	bench bare -listen ADDR -to URL        httputil.ReverseProxy to URL
//	bench load -url URL -method M -rate R -duration D [-token T]
//	bench seed -redis URL -n N             enqueue N due callouts (redisstore.Enqueue)
//	bench drain -redis URL -n N            wait until the backlog is empty
//	bench summary FILE.jsonl…              BENCHMARKS.md's before/after table rows
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bench upstream|bare|load|seed|drain|summary [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "upstream":
		err = upstream(os.Args[2:])
	case "bare":
		err = bare(os.Args[2:])
	case "load":
		err = load(os.Args[2:])
	case "seed":
		err = seed(os.Args[2:])
	case "drain":
		err = drain(os.Args[2:])
	case "summary":
		err = summary(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
