package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v3"
	"golang.org/x/term"
)

// Environment variables calloutctl reads.
const (
	envServer = "CALLOUTCTL_SERVER"
	envToken  = "CALLOUTCTL_TOKEN"
)

// defaultServer is the admin listener of a default configuration (SPEC §10).
const defaultServer = "http://127.0.0.1:8081"

// app is one run of calloutctl with everything it touches made explicit.
type app struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// now is the clock: relative --since/--until are measured from it.
	now func() time.Time
	// isTerminal reports whether w is a terminal: the progress bar and
	// prompts appear only then.
	isTerminal func(w io.Writer) bool
	// pollEvery is how often a bulk action's progress is read.
	pollEvery time.Duration
	// throttle is the progress bar's least time between redraws.
	throttle time.Duration
	// httpClient is the admin API's HTTP client (timeout per request).
	httpClient *http.Client
}

// newApp returns an app on the real clock and terminal.
func newApp(getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) *app {
	return &app{
		getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr, now: time.Now,
		isTerminal: isTerminal, pollEvery: 500 * time.Millisecond, throttle: 100 * time.Millisecond,
		httpClient: &http.Client{Timeout: 30 * time.Second},
	}
}

// isTerminal reports whether w is an *os.File on a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// run parses args (without the program name) and runs the command.
func (a *app) run(ctx context.Context, args []string) error {
	root := a.command()
	return root.Run(ctx, append([]string{"calloutctl"}, args...))
}

// command is the command tree.
func (a *app) command() *cli.Command {
	root := &cli.Command{
		Name:  "calloutctl",
		Usage: "operate a Callout Proxy: dead letters, replays, endpoints",
		Description: "calloutctl talks to the proxy's admin API (admin_listen, /admin/v1) with a named\n" +
			"bearer token: scope read lists and shows, scope write replays, discards and changes\n" +
			"endpoints. Times (--since, --until) are RFC 3339 (2025-01-31T14:00:00Z), a date\n" +
			"(2025-01-31, UTC) or a duration ago (90m, 36h, 7d).\n\n" + exitCodesHelp,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "server", Usage: "admin API base URL (default " + defaultServer + ")",
				Sources: cli.NewValueSourceChain(envSource{key: envServer, getenv: a.getenv})},
			&cli.StringFlag{Name: "token", Usage: "admin bearer token",
				Sources: cli.NewValueSourceChain(envSource{key: envToken, getenv: a.getenv})},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", Usage: "table or json"},
		},
		Commands: []*cli.Command{
			a.deadLettersCommand(), a.replayCommand(), a.replayJobsCommand(),
			a.endpointsCommand(), a.calloutsCommand(),
		},
		Action:      a.groupAction,
		Writer:      a.stdout,
		ErrWriter:   a.stderr,
		Reader:      a.stdin,
		HideVersion: true,
		// run returns every error; main prints it and picks the exit code.
		ExitErrHandler: func(context.Context, *cli.Command, error) {},
	}
	forEachCommand(root, func(c *cli.Command) {
		c.OnUsageError = func(_ context.Context, _ *cli.Command, err error, _ bool) error {
			return withCode(exitUsage, err)
		}
		if c.Action == nil {
			c.Action = a.groupAction
		}
	})
	return root
}

// forEachCommand calls fn on c and every command below it.
func forEachCommand(c *cli.Command, fn func(*cli.Command)) {
	fn(c)
	for _, sub := range c.Commands {
		forEachCommand(sub, fn)
	}
}

// groupAction runs for a command that only groups others: help without
// arguments, a usage error naming an unknown command otherwise.
func (a *app) groupAction(ctx context.Context, c *cli.Command) error {
	if c.Args().Present() {
		return usagef("no such command %q (see %s --help)", c.Args().First(), c.FullName())
	}
	if err := cli.ShowSubcommandHelp(c); err != nil {
		return err
	}
	if c.Root() == c {
		return nil
	}
	return withCode(exitUsage, errors.New("a command is required after "+c.FullName()))
}

// envSource is a flag's fallback from the injected environment.
type envSource struct {
	key    string
	getenv func(string) string
}

func (e envSource) Lookup() (string, bool) {
	v := e.getenv(e.key)
	return v, v != ""
}
func (e envSource) String() string   { return "environment variable " + e.key }
func (e envSource) GoString() string { return "envSource{" + e.key + "}" }
func (e envSource) IsFromEnv() bool  { return true }
func (e envSource) Key() string      { return e.key }

// client returns the admin API client of c's --server and --token.
func (a *app) client(c *cli.Command) (*client, error) {
	server := c.String("server")
	if server == "" {
		server = defaultServer
	}
	u, err := url.Parse(strings.TrimRight(server, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("--server %q is not an http(s) URL", server)
	}
	if c.String("token") == "" {
		return nil, usagef("no admin token: pass --token or set %s", envToken)
	}
	return &client{base: u.JoinPath("/admin/v1"), token: c.String("token"), hc: a.httpClient}, nil
}

// jsonOutput reports whether -o json was asked for; anything but table
// or json is a usage error.
func jsonOutput(c *cli.Command) (bool, error) {
	switch o := c.String("output"); o {
	case "json":
		return true, nil
	case "table", "":
		return false, nil
	default:
		return false, usagef("-o %q: use table or json", o)
	}
}

// oneArg returns the single positional argument what of c.
func oneArg(c *cli.Command, what string) (string, error) {
	if c.NArg() != 1 {
		return "", usagef("%s: exactly one %s is required", c.FullName(), what)
	}
	return c.Args().First(), nil
}

// setup returns c's client and output mode.
func (a *app) setup(c *cli.Command) (*client, bool, error) {
	asJSON, err := jsonOutput(c)
	if err != nil {
		return nil, false, err
	}
	cl, err := a.client(c)
	return cl, asJSON, err
}

// printf writes to stdout.
func (a *app) printf(format string, args ...any) { fmt.Fprintf(a.stdout, format, args...) }

// notef writes a note to stderr.
func (a *app) notef(format string, args ...any) { fmt.Fprintf(a.stderr, format, args...) }
