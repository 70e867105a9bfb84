package main

import (
	"bufio"
	"context"
	"errors"
	"strings"

	"github.com/urfave/cli/v3"
)

// errDeclined is a confirmation answered anything but yes (exit 4).
var errDeclined = errors.New("not confirmed; nothing was done (pass --yes to skip the question)")

// yesFlag is --yes (-y): every command that changes something takes it,
// so a script can pass it to each; those that may ask first (disable,
// discard, replay) then do not ask, the others never ask.
func yesFlag() cli.Flag {
	return &cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "do not ask for confirmation"}
}

// confirm asks question on stderr and reads the answer from stdin: "y" or
// "yes" (any case) goes on; anything else, or end of input, declines with
// exit code 4. Bulk actions ask unless --yes is given. Ctrl-C while it
// waits ends the run (ctx), not only the read.
func (a *app) confirm(ctx context.Context, question string) error {
	a.notef("%s [y/N] ", question)
	type answer struct {
		line string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		line, err := bufio.NewReader(a.stdin).ReadString('\n')
		got <- answer{line, err}
	}()
	var ans answer
	select {
	case <-ctx.Done():
		a.notef("\n")
		return ctx.Err()
	case ans = <-got:
	}
	if ans.err != nil && ans.line == "" {
		a.notef("\n")
		return withCode(exitRefused, errDeclined)
	}
	if !a.isTerminal(a.stdin) {
		a.notef("%s\n", strings.TrimSpace(ans.line)) // a terminal echoed it; a pipe did not
	}
	switch strings.ToLower(strings.TrimSpace(ans.line)) {
	case "y", "yes":
		return nil
	}
	return withCode(exitRefused, errDeclined)
}
