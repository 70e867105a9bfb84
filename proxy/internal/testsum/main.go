// Command testsum counts the test suite's results for its closing line
// (.ci/test.sh): "N passed, N failed, N skipped".
//
//	go test -json ./... | testsum json TALLY   # go test's output, condensed as without -v
//	bash .ci/fault.sh | testsum text TALLY     # -v text passed through unchanged
//	testsum total TALLY                        # the closing line
//
// json and text add what they read to TALLY (a file of three numbers,
// created when missing), so the totals cover every go test the suite runs.
// json prints what go test prints without -v: package results, build
// errors, and the whole output of each failed test, never a passing one's.
// text counts the "--- PASS", "--- FAIL" and "--- SKIP" lines of -v
// output, subtests included. A package that failed without a failed test
// (a build error, a panic in TestMain, a timeout) counts as one failure.
// testsum exits 0 whatever the tests did (the suite keeps go test's exit
// status through pipefail); 2 on a usage or file error.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		os.Exit(2)
	}
}

// counts are test results.
type counts struct{ pass, fail, skip int }

func (c counts) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", c.pass, c.fail, c.skip)
}

// run is the command: args are the mode and the tally file.
func run(args []string, in io.Reader, out io.Writer) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: testsum json|text|total TALLY")
	}
	tally, err := readTally(args[1])
	if err != nil {
		return err
	}
	var got counts
	switch args[0] {
	case "json":
		got, err = fromJSON(in, out)
	case "text":
		got, err = fromText(in, out)
	case "total":
		_, err = fmt.Fprintln(out, tally)
		return err
	default:
		return fmt.Errorf("unknown mode %q: use json, text or total", args[0])
	}
	tally.pass, tally.fail, tally.skip = tally.pass+got.pass, tally.fail+got.fail, tally.skip+got.skip
	if werr := os.WriteFile(args[1], []byte(fmt.Sprintf("%d %d %d\n", tally.pass, tally.fail, tally.skip)), 0o644); werr != nil {
		return werr
	}
	return err
}

// readTally reads a tally file; zero counts when it does not exist.
func readTally(path string) (counts, error) {
	var c counts
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if _, err := fmt.Sscan(string(b), &c.pass, &c.fail, &c.skip); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// fromJSON reads go test -json, writes its condensed output and counts.
func fromJSON(in io.Reader, out io.Writer) (counts, error) {
	var c counts
	held := map[string][]string{} // output of running tests, by package and test
	failedTests := map[string]bool{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Fprintln(out, sc.Text()) // not an event: go's own message
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Action == "output" && e.Test != "":
			held[key] = append(held[key], e.Output)
		case e.Action == "output" || e.Action == "build-output":
			if e.Output != "PASS\n" {
				fmt.Fprint(out, e.Output)
			}
		case e.Test != "" && e.Action == "pass":
			c.pass++
			delete(held, key)
		case e.Test != "" && e.Action == "skip":
			c.skip++
			delete(held, key)
		case e.Test != "" && e.Action == "fail":
			c.fail++
			failedTests[e.Package] = true
			fmt.Fprint(out, strings.Join(held[key], ""))
			delete(held, key)
		case e.Test == "" && e.Action == "fail" && !failedTests[e.Package]:
			c.fail++ // the package failed without a failed test
			for k, lines := range held {
				if strings.HasPrefix(k, e.Package+" ") {
					fmt.Fprint(out, strings.Join(lines, "")) // e.g. the test that timed out
				}
			}
		}
	}
	return c, sc.Err()
}

// fromText passes -v text through and counts its result lines.
func fromText(in io.Reader, out io.Writer) (counts, error) {
	var c counts
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(out, line)
		switch t := strings.TrimLeft(line, " \t"); {
		case strings.HasPrefix(t, "--- PASS: "):
			c.pass++
		case strings.HasPrefix(t, "--- FAIL: "):
			c.fail++
		case strings.HasPrefix(t, "--- SKIP: "):
			c.skip++
		}
	}
	return c, sc.Err()
}
