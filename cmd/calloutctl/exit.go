package main

import (
	"errors"
	"fmt"
)

// Exit codes of calloutctl (documented in its --help and the README).
const (
	// exitOK: done.
	exitOK = 0
	// exitError: the server failed or could not be reached, or an
	// unexpected answer.
	exitError = 1
	// exitUsage: a bad command line (unknown command or flag, missing
	// argument, malformed value).
	exitUsage = 2
	// exitNotFound: no such dead letter, callout, replay job or endpoint.
	exitNotFound = 3
	// exitRefused: the token was refused (401, 403); the action conflicts
	// (409, e.g. a newer dead letter holds the key) or is refused (the
	// endpoint is disabled, its backlog is full); or the confirmation was
	// declined.
	exitRefused = 4
	// exitPartial: a bulk action ended with some dead letters that should
	// have been sent not sent (refused, failed), or was cancelled part-way.
	// Skips that are the end state asked for (already replayed, superseded
	// by a newer dead letter, gone) are not failures.
	exitPartial = 5
	// exitInterrupted: stopped by Ctrl-C (SIGINT) or SIGTERM: 128 + 2, as a
	// shell reports a process killed by SIGINT.
	exitInterrupted = 130
)

// exitCodesHelp is the exit-code table of --help.
const exitCodesHelp = `EXIT CODES:
   0  done
   1  error: the server failed or could not be reached
   2  usage: bad command line
   3  not found: no such dead letter, callout, replay job or endpoint
   4  refused: token refused (401/403), conflict (409), endpoint disabled or
      backlog full, or the confirmation was declined
   5  partially done: a bulk action left dead letters that should have been
      sent unsent (refused, failed), or was cancelled part-way; dead letters
      skipped because they were already replayed are not failures
 130  interrupted (Ctrl-C)`

// codedError carries an exit code with its error.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// withCode wraps err with an exit code.
func withCode(code int, err error) error { return &codedError{code: code, err: err} }

// usagef is a usage error (exit 2).
func usagef(format string, args ...any) error {
	return withCode(exitUsage, fmt.Errorf(format, args...))
}

// exitCode is the process exit code for run's error.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.exitCode()
	}
	return exitError
}
