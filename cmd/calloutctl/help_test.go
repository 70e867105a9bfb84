package main

import (
	"context"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestHelpAfterArguments: --help (-h) shows the help of the command it
// follows, with or without positional arguments and flags before it, and
// sends nothing (no server is set); after "--" it is an argument.
func TestHelpAfterArguments(t *testing.T) {
	for _, args := range [][]string{
		{"endpoints", "disable", "--help"},
		{"endpoints", "disable", "slowup", "--help"},
		{"endpoints", "disable", "slowup", "-h"},
		{"--server", "http://127.0.0.1:1", "-o", "json", "endpoints", "disable", "slowup", "--help"},
		{"endpoints", "disable", "--output=wide", "slowup", "extra", "--help"},
	} {
		var out, errw proctest.LogBuffer
		a := newApp(func(string) string { return "" }, strings.NewReader(""), &out, &errw)
		if err := a.run(context.Background(), args); err != nil ||
			!strings.Contains(out.String(), "calloutctl endpoints disable - disable an endpoint") {
			t.Errorf("%q: %v\nstdout:\n%s\nstderr:\n%s", args, err, out.String(), errw.String())
		}
	}
	var out proctest.LogBuffer
	a := newApp(func(string) string { return "" }, strings.NewReader(""), &out, &proctest.LogBuffer{})
	if err := a.run(context.Background(), []string{"endpoints", "disable", "--", "--help"}); exitCode(err) != exitUsage ||
		strings.Contains(out.String(), "USAGE") {
		t.Errorf("after --, --help is the endpoint's name: %v\n%s", err, out.String())
	}
}
