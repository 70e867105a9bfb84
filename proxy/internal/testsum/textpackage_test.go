package main

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// TestTextStepCountsEveryFailedPackage: a step
// whose go test runs print -v text (the fault, hostile, real-client and k8s
// steps, through .ci/lib.sh quiet_v) can fail in two packages, one with a
// failed test ("--- FAIL") and one without (a build failure, a timeout, an
// os.Exit in a test: "FAIL\tpkg ..." and no "--- FAIL"). Each failed
// package is at least one failure in the closing line, whatever the others
// did. This test runs a real go test -v on such a module (three packages)
// and wants three failures.
func TestTextStepCountsEveryFailedPackage(t *testing.T) {
	cmd := goTest(t, map[string]string{
		"a/a_test.go": "package a\nimport \"testing\"\nfunc TestFail(t *testing.T) { t.Fail() }\n",
		"b/b_test.go": "package b\nimport \"testing\"\nfunc TestBroken(t *testing.T) { undefined() }\n",
		"c/c_test.go": "package c\nimport (\"os\"; \"testing\")\nfunc TestExits(t *testing.T) { os.Exit(3) }\n",
	}, "-v", "-count=1")
	raw, _ := cmd.CombinedOutput() // exit 1: every package fails
	got := closingLine(t, bytes.NewReader(raw))
	// Three packages failed: a (a failed test), b (does not build), c (a
	// test exited the binary). Each is at least one failure.
	if !strings.HasPrefix(got, "0 passed, 3 failed") {
		t.Errorf("closing line %q, want 3 failed (a, b and c each failed)\ngo test -v printed:\n%s", got, raw)
	}
}

// TestJSONStepCountsATimedOutTest: go test
// -json of a package in which one test failed and a later one hung until
// -timeout killed the binary (the events go 1.26 writes, recorded from a
// real run; output events left out): test2json ends the hung test with no
// event of its own, only the package's "fail". The hung test is a failure
// beside the one that failed: two.
func TestJSONStepCountsATimedOutTest(t *testing.T) {
	events := `{"Action":"start","Package":"s/a"}
{"Action":"run","Package":"s/a","Test":"TestFail"}
{"Action":"fail","Package":"s/a","Test":"TestFail","Elapsed":0}
{"Action":"run","Package":"s/a","Test":"TestHang"}
{"Action":"output","Package":"s/a","Test":"TestHang","Output":"panic: test timed out after 2s\n"}
{"Action":"fail","Package":"s/a","Elapsed":2.009}
`
	got := closingLine(t, strings.NewReader(events))
	if !strings.HasPrefix(got, "0 passed, 2 failed") {
		t.Errorf("closing line %q, want 2 failed (TestFail, and TestHang that timed out)", got)
	}
}

// TestTextStepCountsUnendedTests: in -v text, a test with "=== RUN" and no
// result is a failure, at its package's FAIL line (a timeout after another
// test failed: the hung subtest counts, once for it and its parent) and at
// the end of the stream (a test binary killed mid-test, no package line
// after it); a passing package's tests are not.
func TestTextStepCountsUnendedTests(t *testing.T) {
	text := "=== RUN   TestA\n--- FAIL: TestA (0.00s)\n=== RUN   TestB\n=== RUN   TestB/sub\n" +
		"panic: test timed out after 2s\nFAIL\ts/a\t2.010s\n" +
		"=== RUN   TestOK\n=== RUN   TestOK/x\n    --- PASS: TestOK/x (0.00s)\n--- PASS: TestOK (0.00s)\nPASS\nok  \ts/b\t0.01s\n" +
		"=== RUN   TestKilled\n"
	got := closingLine(t, strings.NewReader(text))
	if got != "2 passed, 3 failed, 0 skipped" {
		t.Errorf("closing line %q, want 2 passed, 3 failed (TestA, TestB/sub timed out, TestKilled)", got)
	}
}

// closingLine counts in (testsum count) into a fresh tally and returns the
// tally's closing line (testsum total).
func closingLine(t *testing.T, in io.Reader) string {
	t.Helper()
	tally := filepath.Join(t.TempDir(), "tally")
	var out bytes.Buffer
	if _, err := command([]string{"count", tally}, in, &out); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if _, err := command([]string{"total", tally}, nil, &out); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out.String())
}
