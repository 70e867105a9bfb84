package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTextStepCountsEveryFailedPackage (rev29b, issue 29 item 11): a step
// whose go test runs print -v text (the fault, hostile, real-client and k8s
// steps, through .ci/lib.sh quiet_v) can fail in two packages, one with a
// failed test ("--- FAIL") and one without (a build failure, a timeout, an
// os.Exit in a test: "FAIL\tpkg ..." and no "--- FAIL"). The -json path
// counts a package that failed without a failed test; the text path does
// not, and step adds its one failure only when nothing was counted, so the
// second package's failure is missing from the closing line. This test runs
// real go test -v on such a module and wants two failures.
func TestTextStepCountsEveryFailedPackage(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go on PATH")
	}
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module sample\n\ngo 1.22\n")
	write("a/a_test.go", "package a\nimport \"testing\"\nfunc TestFail(t *testing.T) { t.Fail() }\n")
	write("b/b_test.go", "package b\nimport \"testing\"\nfunc TestBroken(t *testing.T) { undefined() }\n")
	write("c/c_test.go", "package c\nimport (\"os\"; \"testing\")\nfunc TestExits(t *testing.T) { os.Exit(3) }\n")
	cmd := exec.Command("go", "test", "-v", "-count=1", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	raw, _ := cmd.CombinedOutput() // exit 1: every package fails
	tally := filepath.Join(t.TempDir(), "tally")
	var out bytes.Buffer
	if _, err := command([]string{"count", tally}, bytes.NewReader(raw), &out); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if _, err := command([]string{"total", tally}, nil, &out); err != nil {
		t.Fatal(err)
	}
	// Three packages failed: a (a failed test), b (does not build), c (a
	// test exited the binary). Each is at least one failure.
	if got := strings.TrimSpace(out.String()); !strings.HasPrefix(got, "0 passed, 3 failed") {
		t.Errorf("closing line %q, want 3 failed (a, b and c each failed)\ngo test -v printed:\n%s", got, raw)
	}
}

// TestJSONStepCountsATimedOutTest (rev29b, issue 29 item 11): go test
// -json of a package in which one test failed and a later one hung until
// -timeout killed the binary (the events go 1.26 writes, recorded from a
// real run; output events left out): test2json ends the hung test with no
// event of its own, only the package's "fail". testsum counts the package
// failure only when no test of the package failed, so the hung test is
// missing from the count: two failures, one counted.
func TestJSONStepCountsATimedOutTest(t *testing.T) {
	events := `{"Action":"start","Package":"s/a"}
{"Action":"run","Package":"s/a","Test":"TestFail"}
{"Action":"fail","Package":"s/a","Test":"TestFail","Elapsed":0}
{"Action":"run","Package":"s/a","Test":"TestHang"}
{"Action":"output","Package":"s/a","Test":"TestHang","Output":"panic: test timed out after 2s\n"}
{"Action":"fail","Package":"s/a","Elapsed":2.009}
`
	tally := filepath.Join(t.TempDir(), "tally")
	var out bytes.Buffer
	if _, err := command([]string{"count", tally}, strings.NewReader(events), &out); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if _, err := command([]string{"total", tally}, nil, &out); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); !strings.HasPrefix(got, "0 passed, 2 failed") {
		t.Errorf("closing line %q, want 2 failed (TestFail, and TestHang that timed out)", got)
	}
}
