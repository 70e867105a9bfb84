package main

import (
	"bufio"
	"errors"
	"strings"
)

// errDeclined is a confirmation answered anything but yes (exit 4).
var errDeclined = errors.New("not confirmed; nothing was done (pass --yes to skip the question)")

// confirm asks question on stderr and reads the answer from stdin: "y" or
// "yes" (any case) goes on; anything else, or end of input, declines with
// exit code 4. Bulk actions ask unless --yes is given.
func (a *app) confirm(question string) error {
	a.notef("%s [y/N] ", question)
	line, err := bufio.NewReader(a.stdin).ReadString('\n')
	if err != nil && line == "" {
		a.notef("\n")
		return withCode(exitRefused, errDeclined)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return withCode(exitRefused, errDeclined)
}
