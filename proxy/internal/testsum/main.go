// Command testsum counts the test suite's results for its closing line
// (.ci/test.sh): "N passed, N failed, N skipped".
//
//	testsum run TALLY NAME CMD [ARG…]   # one step of the suite: runs CMD, counts what it prints
//	go test -json ./... | testsum count TALLY   # counts a stream
//	testsum total TALLY                 # the closing line
//
// run and count add what they saw to TALLY (a file of three numbers,
// created when missing), so the totals cover every step. Both read the
// same lines, mixed as a step's scripts print them:
//   - go test -json events (cmd/test2json), condensed to what go test
//     prints without -v: package results, build errors, and the whole
//     output of each failed test, never a passing one's. When a package
//     fails, each of its tests that started and never ended (killed by
//     -timeout, or by an os.Exit) counts as one failure; a package that
//     failed with neither such a test nor a failed one (a build error, a
//     panic in TestMain) counts as one;
//   - go test -v text, passed through, its "--- PASS", "--- FAIL" and
//     "--- SKIP" lines counted, subtests included; at a package's "FAIL\t"
//     line (and at the end of the stream, for a test binary run without go
//     test) the same rule as for -json: a test with "=== RUN" and no result
//     is a failure, and a failed package with none counted is one;
//   - TAP-style check lines, "ok - …" and "not ok - …" (optionally
//     numbered, "ok 3 - …"), passed through and counted: the console's
//     browser test prints them.
//
// run starts CMD with its stdout and stderr into one stream, and exits
// with CMD's exit status. A step that printed no result counts as one
// named check, NAME: passed when CMD exited 0, failed otherwise (written
// "ok - NAME" or "not ok - NAME (exit N)"); a step that failed without a
// failed result counts one failure more, NAME's, so that a failing step
// always shows in the failed count. testsum exits 2 on a usage or file
// error.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

func main() {
	code, err := command(os.Args[1:], os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

// counts are test results.
type counts struct{ pass, fail, skip int }

func (c counts) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", c.pass, c.fail, c.skip)
}

const usage = "usage: testsum run TALLY NAME CMD [ARG...] | count TALLY | total TALLY"

// command is the command: args are the mode, the tally file and, for run,
// the step's name and command. It returns the exit status: run's is the
// command's, the others' 0.
func command(args []string, in io.Reader, out io.Writer) (int, error) {
	if len(args) < 2 || (args[0] == "run") != (len(args) >= 4) || (args[0] != "run" && len(args) != 2) {
		return 0, errors.New(usage)
	}
	tally, err := readTally(args[1])
	if err != nil {
		return 0, err
	}
	var got counts
	code := 0
	switch args[0] {
	case "count":
		got, err = scan(in, out)
	case "run":
		got, code, err = step(args[2], args[3:], out)
	case "total":
		_, err = fmt.Fprintln(out, tally)
		return 0, err
	default:
		return 0, fmt.Errorf("unknown mode %q: %s", args[0], usage)
	}
	tally.pass, tally.fail, tally.skip = tally.pass+got.pass, tally.fail+got.fail, tally.skip+got.skip
	if werr := os.WriteFile(args[1], []byte(fmt.Sprintf("%d %d %d\n", tally.pass, tally.fail, tally.skip)), 0o644); werr != nil {
		return code, werr
	}
	return code, err
}

// step runs one step of the suite, cmd, writes what it prints (condensed:
// scan) to out and counts its results, as the package comment says; it
// returns them and cmd's exit status (127 when cmd could not start).
func step(name string, cmd []string, out io.Writer) (counts, int, error) {
	pr, pw := io.Pipe()
	c := exec.Command(cmd[0], cmd[1:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, pw, pw
	type result struct {
		counts
		err error
	}
	scanned := make(chan result, 1)
	go func() {
		got, err := scan(pr, out)
		_, _ = io.Copy(io.Discard, pr) // an over-long line stopped scan: let cmd finish
		scanned <- result{got, err}
	}()
	code := 0
	runErr := c.Run()
	pw.Close()
	r := <-scanned
	var exit *exec.ExitError
	switch {
	case errors.As(runErr, &exit):
		code = exit.ExitCode()
		if code < 0 {
			code = 128 // killed by a signal
		}
	case runErr != nil:
		code = 127
		fmt.Fprintf(out, "testsum: %s: %v\n", name, runErr)
	}
	got := r.counts
	switch {
	case code != 0 && got.fail == 0:
		got.fail++
		fmt.Fprintf(out, "not ok - %s (exit %d)\n", name, code)
	case code == 0 && got == counts{}:
		got.pass++
		fmt.Fprintf(out, "ok - %s\n", name)
	}
	return got, code, r.err
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

// tap matches a TAP-style check line: "ok - name", "not ok 3 - name".
var tap = regexp.MustCompile(`^(not )?ok( [0-9]+)? - `)

// scan reads a step's output (go test -json events, -v text, check lines),
// writes it condensed and counts its results.
func scan(in io.Reader, out io.Writer) (counts, error) {
	var c counts
	held := map[string][]string{} // output of running tests, by package and test
	failedTests := map[string]bool{}
	running := map[string]bool{}     // -json: tests started and not ended, by package and test
	textRunning := map[string]bool{} // -v text: the same, by test name, since the last package line
	textFails := 0                   // -v text: failures counted since the last package line
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var e event
		// An event has the key "Action" as test2json writes it; a log line
		// with "action" (an audit line) is text: encoding/json would match
		// the key without regard to case.
		if b := sc.Bytes(); len(b) == 0 || b[0] != '{' || !bytes.Contains(b, []byte(`"Action":`)) ||
			json.Unmarshal(b, &e) != nil || e.Action == "" {
			line := sc.Text() // text: -v output, check lines, go's and the scripts' own messages
			fmt.Fprintln(out, line)
			t := strings.TrimLeft(line, " \t")
			if name, ok := strings.CutPrefix(line, "=== RUN"); ok {
				textRunning[strings.TrimSpace(name)] = true
			}
			for _, p := range []string{"--- PASS: ", "--- FAIL: ", "--- SKIP: "} {
				if rest, ok := strings.CutPrefix(t, p); ok {
					name, _, _ := strings.Cut(rest, " (")
					delete(textRunning, name)
				}
			}
			switch m := tap.FindStringSubmatch(line); {
			case strings.HasPrefix(t, "--- PASS: "), m != nil && m[1] == "":
				c.pass++
			case strings.HasPrefix(t, "--- FAIL: "), m != nil:
				c.fail++
				textFails++
			case strings.HasPrefix(t, "--- SKIP: "):
				c.skip++
			case strings.HasPrefix(line, "FAIL\t"): // a package failed: FAIL\tpkg\t1.2s, FAIL\tpkg [build failed]
				c.fail += packageFailed(textRunning, textFails > 0, "")
				fallthrough
			case strings.HasPrefix(line, "ok  \t"), strings.HasPrefix(line, "?   \t"):
				clear(textRunning)
				textFails = 0
			}
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Action == "run" && e.Test != "":
			running[key] = true
		case e.Action == "pass", e.Action == "skip", e.Action == "fail":
			delete(running, key)
		}
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
		case e.Test == "" && e.Action == "fail":
			c.fail += packageFailed(running, failedTests[e.Package], e.Package+" ")
			for k, lines := range held {
				if strings.HasPrefix(k, e.Package+" ") {
					fmt.Fprint(out, strings.Join(lines, "")) // e.g. the test that timed out
					delete(held, k)
				}
			}
		}
	}
	// a stream that ends with tests started and not ended (a test binary
	// killed or exited mid-test, with no package line after it): each is a
	// failure
	c.fail += unended(textRunning, "")
	return c, sc.Err()
}

// packageFailed is the number of failures a failed package adds beyond its
// failed tests (failed: whether one was counted), forgetting its tests from
// running: one for each test that started and never ended, or, with none
// and no failed test, one for the package itself.
func packageFailed(running map[string]bool, failed bool, prefix string) int {
	n := unended(running, prefix)
	if n == 0 && !failed {
		return 1
	}
	return n
}

// unended counts and forgets the tests of running whose key starts with
// prefix (prefix+name): each one that started and never ended, a parent
// whose subtest is also unended counting once, as that subtest.
func unended(running map[string]bool, prefix string) int {
	n := 0
	for k := range running {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		leaf := true
		for o := range running {
			if strings.HasPrefix(o, k+"/") {
				leaf = false
				break
			}
		}
		if leaf {
			n++
		}
	}
	for k := range running {
		if strings.HasPrefix(k, prefix) {
			delete(running, k)
		}
	}
	return n
}
