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
// feeds it to testsum count, adds a -v text run, and checks the closing
// line and what was printed: the failed test's output, not the passing
// one's; the build error.
func TestTallyOfRealGoTestRuns(t *testing.T) {
	cmd := goTest(t, map[string]string{
		"a/a_test.go": `package a
import "testing"
func TestPass(t *testing.T) { t.Log("quiet when passing") }
func TestFail(t *testing.T) { t.Log("shown when failing"); t.Fail() }
func TestSkip(t *testing.T) { t.Skip("not here") }
func TestSubs(t *testing.T) {
	t.Run("one", func(t *testing.T) {})
	t.Run("two", func(t *testing.T) {})
}
`,
		"b/b_test.go": "package b\nimport \"testing\"\nfunc TestBroken(t *testing.T) { undefined() }\n",
	}, "-json")
	raw, _ := cmd.Output() // exit 1: tests fail
	tally := filepath.Join(t.TempDir(), "tally")
	var out bytes.Buffer
	if _, err := command([]string{"count", tally}, bytes.NewReader(raw), &out); err != nil {
		t.Fatal(err)
	}
	printed := out.String()
	if !strings.Contains(printed, "shown when failing") || strings.Contains(printed, "quiet when passing") ||
		!strings.Contains(printed, "undefined") {
		t.Errorf("printed:\n%s", printed)
	}
	text := "=== RUN   TestX\n--- PASS: TestX (0.00s)\n    --- FAIL: TestX/y (0.00s)\nok\n" +
		`{"level":"INFO","msg":"audit","action":"pass","test":"x"}` + "\n" // a proxy's log line: text
	out.Reset()
	if _, err := command([]string{"count", tally}, strings.NewReader(text), &out); err != nil || out.String() != text {
		t.Fatalf("text mode: %v, printed %q", err, out.String())
	}
	out.Reset()
	if _, err := command([]string{"total", tally}, nil, &out); err != nil {
		t.Fatal(err)
	}
	// json: Pass, Subs, Subs/one, Subs/two pass; Fail fails; Skip; b fails to build. text: 1 pass, 1 fail.
	if got := strings.TrimSpace(out.String()); got != "5 passed, 3 failed, 1 skipped" {
		t.Errorf("total = %q", got)
	}
	for _, args := range [][]string{{"nope", tally}, {"count"}, {"run", tally, "name"}, {"total", tally, "x"}} {
		if _, err := command(args, nil, &out); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

// TestRunCountsEveryStep: run counts a step's check lines and -v lines as
// they come, a step that printed no result as one named check, and a
// failing step that printed no failure as one failure more; it returns
// the step's exit status and passes its output (stderr too) through.
func TestRunCountsEveryStep(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh on PATH")
	}
	tally := filepath.Join(t.TempDir(), "tally")
	steps := []struct {
		name, script string
		code         int
		printed      string
		total        string // the tally after the step
	}{
		{"gofmt", "true", 0, "ok - gofmt\n", "1 passed, 0 failed, 0 skipped"},
		{"apex", "echo broken >&2; exit 3", 3, "broken\nnot ok - apex (exit 3)\n", "1 passed, 1 failed, 0 skipped"},
		{"e2e", "echo 'ok - login'; echo 'ok 2 - reset'; echo 'not ok - replay'; echo '1 passed'; exit 1", 1,
			"ok - login\nok 2 - reset\nnot ok - replay\n1 passed\n", "3 passed, 2 failed, 0 skipped"},
		{"deploy", "echo '--- PASS: TestChart (0.01s)'; echo '--- SKIP: TestX (0.00s)'; exit 1", 1,
			"--- PASS: TestChart (0.01s)\n--- SKIP: TestX (0.00s)\nnot ok - deploy (exit 1)\n", "4 passed, 3 failed, 1 skipped"},
		{"nothing", "exec /nonexistent/command", 127, "", "4 passed, 4 failed, 1 skipped"},
	}
	for _, s := range steps {
		var out bytes.Buffer
		code, err := command([]string{"run", tally, s.name, "sh", "-c", s.script}, nil, &out)
		if err != nil || code != s.code {
			t.Fatalf("%s: exit %d, %v; want %d", s.name, code, err, s.code)
		}
		if s.printed != "" && out.String() != s.printed {
			t.Errorf("%s printed %q, want %q", s.name, out.String(), s.printed)
		}
		var total bytes.Buffer
		if _, err := command([]string{"total", tally}, nil, &total); err != nil || strings.TrimSpace(total.String()) != s.total {
			t.Fatalf("after %s: total %q, %v; want %q", s.name, total.String(), err, s.total)
		}
	}
}

// goTest writes a module named sample with files (path: content) into a
// new temporary directory and returns `go test <flags> ./...` to run in
// it, with GOFLAGS and GOWORK cleared. It skips the test when go is not
// on PATH.
func goTest(t *testing.T, files map[string]string, flags ...string) *exec.Cmd {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go on PATH")
	}
	dir := t.TempDir()
	files["go.mod"] = "module sample\n\ngo 1.22\n"
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", append(append([]string{"test"}, flags...), "./...")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	return cmd
}
