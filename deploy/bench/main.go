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
	"slices"
	"strings"
)

func main() {
	commands := []struct {
		name string
		run  func(args []string) error
	}{
		{"upstream", upstream},
		{"bare", bare},
		{"load", load},
		{"seed", seed},
		{"drain", drain},
		{"summary", summary},
	}
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bench "+strings.Join(names, "|")+" [flags]")
		os.Exit(2)
	}
	i := slices.Index(names, os.Args[1])
	if i < 0 {
		fmt.Fprintf(os.Stderr, "bench: unknown subcommand %q\n", os.Args[1])
		os.Exit(1)
	}
	if err := commands[i].run(os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
