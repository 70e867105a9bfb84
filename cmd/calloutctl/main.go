// Command calloutctl operates a Callout Proxy through its admin API
// (contract §9): find dead letters, replay them one by one or in bulk
// (filtered by endpoint, time window, status code and reason, paced by a
// rate, with a dry run), follow and cancel replay jobs, and enable,
// disable or reset endpoints. It talks to the admin API over HTTP only.
//
// Usage:
//
//	calloutctl [--server URL] [--token TOKEN] [-o table|json] COMMAND ...
//
//	dead-letters list [--endpoint E]... [--since T] [--until T] [--status N]... [--reason R]... [--all] [--watch]
//	dead-letters get ID
//	dead-letters discard ID... [--yes]
//	replay ID                                   replay one dead letter now
//	replay ID... [--rate N] [--dry-run] [--yes] replay several as a job
//	replay --endpoint E [--since T] [--until T] [--status N]... [--reason R]... [--dry-run] [--rate N] [--yes]
//	replay-jobs list [--watch] | get ID [--items] [--wait] | cancel ID [--yes]
//	endpoints list [--watch] | enable NAME [--yes] | disable NAME [--reason TEXT] [--yes] | reset NAME [--yes]
//	callouts list [--endpoint E] [--state S] [--watch] | get ID
//	completion bash|zsh|fish
//
// deadletters is an alias of dead-letters. Table times are to the second,
// relative within a day ("in 12s", "3m ago"); --watch redraws a list every
// --interval until Ctrl-C.
//
// --server defaults to $CALLOUTCTL_SERVER, else http://127.0.0.1:8081;
// --token to $CALLOUTCTL_TOKEN. Times are RFC 3339, a date (UTC), or a
// duration ago (90m, 36h, 7d). Exit codes: 0 done, 1 error, 2 usage, 3 not
// found, 4 refused (token, conflict, endpoint disabled, declined), 5
// partially done.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "calloutctl:", err)
	}
	os.Exit(exitCode(err))
}

// run is the whole program: args are the command line without the program
// name; getenv supplies CALLOUTCTL_SERVER and CALLOUTCTL_TOKEN. Its error's
// exit code is exitCode(err). It is what the tests call.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	return newApp(getenv, stdin, stdout, stderr).run(ctx, args)
}
