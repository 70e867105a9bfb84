package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTallyOfRealGoTestRuns runs go test -json on a small module of
// passing, failing, skipped and sub tests and one that does not build,
// feeds it to testsum json, adds a -v text run, and checks the closing
// line and what was printed: the failed test's output, not the passing
// one's; the build error.
func TestTallyOfRealGoTestRuns(t *testing.T) {
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
	write("a/a_test.go", `package a
import "testing"
func TestPass(t *testing.T) { t.Log("quiet when passing") }
func TestFail(t *testing.T) { t.Log("shown when failing"); t.Fail() }
func TestSkip(t *testing.T) { t.Skip("not here") }
func TestSubs(t *testing.T) {
	t.Run("one", func(t *testing.T) {})
	t.Run("two", func(t *testing.T) {})
}
`)
	write("b/b_test.go", "package b\nimport \"testing\"\nfunc TestBroken(t *testing.T) { undefined() }\n")
	cmd := exec.Command("go", "test", "-json", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	raw, _ := cmd.Output() // exit 1: tests fail
	tally := filepath.Join(t.TempDir(), "tally")
	var out bytes.Buffer
	if err := run([]string{"json", tally}, bytes.NewReader(raw), &out); err != nil {
		t.Fatal(err)
	}
	printed := out.String()
	if !strings.Contains(printed, "shown when failing") || strings.Contains(printed, "quiet when passing") ||
		!strings.Contains(printed, "undefined") {
		t.Errorf("printed:\n%s", printed)
	}
	text := "=== RUN   TestX\n--- PASS: TestX (0.00s)\n    --- FAIL: TestX/y (0.00s)\nok\n"
	out.Reset()
	if err := run([]string{"text", tally}, strings.NewReader(text), &out); err != nil || out.String() != text {
		t.Fatalf("text mode: %v, printed %q", err, out.String())
	}
	out.Reset()
	if err := run([]string{"total", tally}, nil, &out); err != nil {
		t.Fatal(err)
	}
	// json: Pass, Subs, Subs/one, Subs/two pass; Fail fails; Skip; b fails to build. text: 1 pass, 1 fail.
	if got := strings.TrimSpace(out.String()); got != "5 passed, 3 failed, 1 skipped" {
		t.Errorf("total = %q", got)
	}
	if err := run([]string{"nope", tally}, nil, &out); err == nil {
		t.Error("unknown mode: no error")
	}
}
