package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v3"
	"golang.org/x/term"
)

// Environment variables calloutctl reads. CALLOUTCTL_SERVER names the
// admin API; CALLOUT_PROXY_ADMIN_URL is accepted too (the name operators
// reach for, as the proxy's own variables start CALLOUT_PROXY_), and
// CALLOUTCTL_SERVER wins when both are set.
const (
	envServer      = "CALLOUTCTL_SERVER"
	envServerAlias = "CALLOUT_PROXY_ADMIN_URL"
	envToken       = "CALLOUTCTL_TOKEN"
)

// defaultServer is the admin listener of a default configuration (contract §10).
const defaultServer = "http://127.0.0.1:8081"

// app is one run of calloutctl with everything it touches made explicit.
type app struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// now is the clock: relative --since/--until are measured from it.
	now func() time.Time
	// isTerminal reports whether f (stdin, stderr) is a terminal: the
	// progress bar, and the question before discarding a single dead
	// letter, appear only then.
	isTerminal func(f any) bool
	// pollEvery is how often a bulk action's progress is read.
	pollEvery time.Duration
	// throttle is the progress bar's least time between redraws.
	throttle time.Duration
	// httpClient is the admin API's HTTP client (timeout per request).
	httpClient *http.Client
	// ticker starts the ticker of --watch (watch.go ticker).
	ticker func(time.Duration) (<-chan time.Time, func())
}

// newApp returns an app on the real clock and terminal.
func newApp(getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) *app {
	return &app{
		getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr, now: time.Now,
		isTerminal: isTerminal, pollEvery: 500 * time.Millisecond, throttle: 100 * time.Millisecond,
		httpClient: &http.Client{Timeout: 30 * time.Second}, ticker: ticker,
	}
}

// isTerminal reports whether f is an *os.File on a terminal.
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}

// run parses args (without the program name) and runs the command. A run
// cut short by ctx (Ctrl-C, SIGTERM) is errInterrupted, exit 130 (128 +
// SIGINT, as shells report it), whatever the command was doing.
//
// --help (-h) shows the help of the command it follows, with positional
// arguments or without (`endpoints disable NAME --help`): they are dropped,
// as the library would read the first as the name of a help topic.
func (a *app) run(ctx context.Context, args []string) error {
	root := a.command()
	opts := args
	if i := slices.Index(args, "--"); i >= 0 {
		opts = args[:i]
	}
	if slices.ContainsFunc(opts, func(w string) bool { return w == "--help" || w == "-h" }) {
		if l := readLine(root, opts); l.args > 0 {
			args = l.flags
		}
	}
	err := root.Run(ctx, append([]string{"calloutctl"}, args...))
	if err != nil && ctx.Err() != nil {
		return withCode(exitInterrupted, errInterrupted)
	}
	return err
}

// errInterrupted is a run stopped by Ctrl-C.
var errInterrupted = errors.New("interrupted")

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
			&cli.StringFlag{Name: "server", Usage: "admin API base URL: the proxy's admin_listen (default " + defaultServer + ")",
				Sources: cli.NewValueSourceChain(envSource{key: envServer, getenv: a.getenv},
					envSource{key: envServerAlias, getenv: a.getenv})},
			&cli.StringFlag{Name: "token", Usage: "admin bearer token",
				Sources: cli.NewValueSourceChain(envSource{key: envToken, getenv: a.getenv})},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table",
				Usage: "table (fits 100 columns), wide (every column) or json"},
		},
		// `calloutctl completion bash|zsh|fish` prints the shell's
		// completion script, which asks `calloutctl __complete` for the
		// candidates (completion.go).
		Commands: append([]*cli.Command{
			a.deadLettersCommand(), a.replayCommand(), a.replayJobsCommand(),
			a.endpointsCommand(), a.calloutsCommand(), a.versionCommand(),
		}, a.completionCommands()...),
		Action:      a.groupAction,
		Writer:      a.stdout,
		ErrWriter:   a.stderr,
		Reader:      a.stdin,
		HideVersion: true,
		// run returns every error; main prints it and picks the exit code.
		ExitErrHandler: func(context.Context, *cli.Command, error) {},
	}
	forEachCommand(root, func(c *cli.Command) {
		c.OnUsageError = func(_ context.Context, c *cli.Command, err error, _ bool) error {
			return withCode(exitUsage, withFlagSuggestion(c, err))
		}
		if c.Action == nil {
			c.Action = a.groupAction
		}
		if c.ArgsUsage == "" && len(c.Commands) == 0 && !c.SkipFlagParsing {
			c.Action = noArgs(c.Action)
		}
	})
	return root
}

// visible is the commands of cs that --help lists.
func visible(cs []*cli.Command) []*cli.Command {
	var out []*cli.Command
	for _, c := range cs {
		if !c.Hidden {
			out = append(out, c)
		}
	}
	return out
}

// withFlagSuggestion adds "did you mean --X?" to the library's error for
// an unknown flag, naming c's closest flag.
func withFlagSuggestion(c *cli.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: ")
	if !ok {
		return err
	}
	name = strings.TrimLeft(name, "-")
	var flags []cli.Flag
	for _, p := range c.Lineage() { // c and its parents, whose flags it takes too
		flags = append(flags, p.VisibleFlags()...)
	}
	if s := cli.SuggestFlag(flags, name, true); s != "" {
		return fmt.Errorf("%w: did you mean %s?", err, s)
	}
	return err
}

// forEachCommand calls fn on c and every command below it.
func forEachCommand(c *cli.Command, fn func(*cli.Command)) {
	fn(c)
	for _, sub := range c.Commands {
		forEachCommand(sub, fn)
	}
}

// noArgs wraps the action of a command that takes no positional arguments
// (no ArgsUsage): one given is a usage error naming it, never silently
// dropped (`callouts list --watch 2s` would watch at the default interval:
// the interval is --interval).
func noArgs(act cli.ActionFunc) cli.ActionFunc {
	return func(ctx context.Context, c *cli.Command) error {
		if c.Args().Present() {
			return usagef("%s takes no arguments, got %q (a flag's value goes after =, e.g. --interval=2s; --watch takes none)",
				c.FullName(), c.Args().First())
		}
		return act(ctx, c)
	}
}

// groupAction runs for a command that only groups others: help without
// arguments, a usage error naming an unknown command otherwise, with the
// closest command name (the library's Jaro-Winkler suggestion).
func (a *app) groupAction(ctx context.Context, c *cli.Command) error {
	if c.Args().Present() {
		name := c.Args().First()
		if s := cli.SuggestCommand(visible(c.Commands), name); s != "" && s != "help" && s != "h" {
			return usagef("no such command %q: did you mean %q? (see %s --help)", name, s, c.FullName())
		}
		return usagef("no such command %q (see %s --help)", name, c.FullName())
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
	return a.newClient(c.String("server"), c.String("token"))
}

// newClient returns the admin API client of server (defaultServer when
// "") with token. Errors: usage errors for a server that is not an http(s)
// URL and for no token.
func (a *app) newClient(server, token string) (*client, error) {
	if server == "" {
		server = defaultServer
	}
	u, err := url.Parse(strings.TrimRight(server, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("--server %q is not an http(s) URL", server)
	}
	if token == "" {
		return nil, usagef("no admin token: pass --token or set %s", envToken)
	}
	return &client{server: server, base: u.JoinPath("/admin/v1"), token: token, hc: a.httpClient}, nil
}

// jsonOutput reports whether -o json was asked for; anything but table,
// wide or json is a usage error.
func jsonOutput(c *cli.Command) (bool, error) {
	o, err := outputMode(c)
	return o == "json", err
}

// wideOutput reports whether -o wide was asked for.
func wideOutput(c *cli.Command) bool { return c.String("output") == "wide" }

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

// setupArg is oneArg(c, what), then setup(c): the start of every command
// that acts on one named thing.
func (a *app) setupArg(c *cli.Command, what string) (string, *client, bool, error) {
	arg, err := oneArg(c, what)
	if err != nil {
		return "", nil, false, err
	}
	cl, asJSON, err := a.setup(c)
	return arg, cl, asJSON, err
}

// printf writes to stdout.
func (a *app) printf(format string, args ...any) { fmt.Fprintf(a.stdout, format, args...) }

// notef writes a note to stderr.
func (a *app) notef(format string, args ...any) { fmt.Fprintf(a.stderr, format, args...) }
