package main

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
)

// completeCommand is the hidden `__complete WORD...` the completion
// scripts call: the words of the command line after "calloutctl", the last
// one the word being completed ("" after a space); it prints the
// candidates for that word, one a line.
const completeCommand = "__complete"

// completionTimeout bounds the admin API requests of one completion: a
// slow or unreachable proxy completes nothing rather than hang the shell.
const completionTimeout = 3 * time.Second

// completionScripts are the scripts `calloutctl completion SHELL` prints.
// Each uses only its shell's built-ins (bash: complete -F and COMP_LINE,
// no bash-completion package; zsh: compdef and compadd of its completion
// system; fish: complete) and asks calloutctl itself for the candidates,
// so endpoint names and ids come from the server in the environment or
// on the command line (--server, --token).
var completionScripts = map[string]string{
	"bash": `# calloutctl completion for bash; needs nothing but bash itself.
# Load it with: source <(calloutctl completion bash)
_calloutctl() {
  local line="${COMP_LINE:0:COMP_POINT}" IFS=$' \t\n'
  local -a words
  read -r -a words <<< "$line"
  [[ "$line" =~ [[:space:]]$ ]] && words+=("")
  IFS=$'\n'
  COMPREPLY=($("${words[0]}" __complete "${words[@]:1}" 2>/dev/null))
  # bash replaces only the text after the last "=" of --flag=VALUE
  # (COMP_WORDBREAKS): give it the candidates' VALUE part.
  local cur="${words[${#words[@]}-1]}"
  if [[ "$cur" == -*=* && "$COMP_WORDBREAKS" == *=* ]]; then
    COMPREPLY=("${COMPREPLY[@]#"${cur%=*}="}")
  fi
}
complete -F _calloutctl calloutctl
`,
	"zsh": `#compdef calloutctl
# calloutctl completion for zsh. Load it with: source <(calloutctl completion zsh)
# (after compinit, as any zsh completion).
_calloutctl() {
  local -a candidates
  candidates=("${(@f)$(${words[1]} __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
  compadd -Q -- "${(@)candidates:#}"
}
compdef _calloutctl calloutctl
`,
	"fish": `# calloutctl completion for fish.
# Load it with: calloutctl completion fish | source
function __calloutctl_complete
    set -l words (commandline -opc)
    calloutctl __complete $words[2..-1] (commandline -ct) 2>/dev/null
end
complete -c calloutctl -f -a '(__calloutctl_complete)'
`,
}

// completionCommands are `completion bash|zsh|fish` and the hidden
// `__complete` the scripts call.
func (a *app) completionCommands() []*cli.Command {
	shells := &cli.Command{Name: "completion", Usage: "print the shell completion script: bash, zsh or fish " +
		"(it completes commands, flags, endpoint names, dead-letter and job ids from the server)",
		Description: "bash: source <(calloutctl completion bash)   (no bash-completion package needed)\n" +
			"zsh:  source <(calloutctl completion zsh)    (after compinit)\n" +
			"fish: calloutctl completion fish | source"}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		shells.Commands = append(shells.Commands, &cli.Command{Name: sh, Usage: "print the " + sh + " script",
			Action: func(context.Context, *cli.Command) error {
				a.printf("%s", completionScripts[sh])
				return nil
			}})
	}
	complete := &cli.Command{Name: completeCommand, Hidden: true, SkipFlagParsing: true,
		Action: func(ctx context.Context, c *cli.Command) error {
			for _, s := range a.completions(ctx, c.Args().Slice()) {
				a.printf("%s\n", s)
			}
			return nil
		}}
	return []*cli.Command{shells, complete}
}

// completions are the candidates for the last of words (the command line
// after "calloutctl"): a flag's value after a flag that takes one (or
// after its "=" in the same word, each candidate then "--flag=VALUE"), flag
// names after "-", subcommand names where a command groups others, else
// the command's arguments — endpoint names, dead-letter, job and callout
// ids read from the server (--server and --token on the line, else the
// environment); those the server cannot give are left out. Each starts
// with the word being completed.
func (a *app) completions(ctx context.Context, words []string) []string {
	if len(words) > 0 && words[0] == "--" {
		words = words[1:]
	}
	if len(words) == 0 {
		words = []string{""}
	}
	cur := words[len(words)-1]
	l := readLine(a.command(), words[:len(words)-1])
	cmd, path, given, awaiting, args := l.cmd, l.path, l.given, l.awaiting, l.args
	var cands []string
	name, _, inline := strings.Cut(strings.TrimLeft(cur, "-"), "=")
	f := flagNamed(path, name)
	switch {
	case awaiting != "":
		cands = a.flagValues(ctx, awaiting, given)
	case strings.HasPrefix(cur, "-") && inline && f != nil && takesValue(f):
		// --flag=VALUE: the value completes as after "--flag ", each
		// candidate the whole word (the bash script trims "--flag=").
		prefix := cur[:strings.Index(cur, "=")+1]
		for _, v := range a.flagValues(ctx, f.Names()[0], given) {
			cands = append(cands, prefix+v)
		}
	case strings.HasPrefix(cur, "-"):
		for _, p := range path {
			for _, f := range p.VisibleFlags() {
				cands = append(cands, "--"+f.Names()[0])
			}
		}
	case args == 0 && len(visible(cmd.Commands)) > 0:
		for _, sub := range visible(cmd.Commands) {
			if sub.Name != "help" {
				cands = append(cands, sub.Name)
			}
		}
	default:
		cands = a.argValues(ctx, path, given)
	}
	var out []string
	for _, s := range cands {
		if strings.HasPrefix(s, cur) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// line is what the words of a command line (after "calloutctl") say.
type line struct {
	cmd      *cli.Command      // the innermost command named
	path     []*cli.Command    // cmd and its parents, innermost first
	given    map[string]string // flag values on the line, by first name
	awaiting string            // a flag waiting for its value
	args     int               // positional arguments of cmd
	flags    []string          // the words without the positional arguments
}

// readLine walks words from root as the library parses them: command
// names until the first positional argument, a flag's value after a flag
// that takes one (or after its "="), everything else an argument.
func readLine(root *cli.Command, words []string) line {
	l := line{cmd: root, path: []*cli.Command{root}, given: map[string]string{}}
	for _, w := range words {
		switch {
		case l.awaiting != "":
			l.given[l.awaiting], l.awaiting = w, ""
		case strings.HasPrefix(w, "-") && len(w) > 1:
			name, val, hasVal := strings.Cut(strings.TrimLeft(w, "-"), "=")
			if f := flagNamed(l.path, name); f != nil && takesValue(f) {
				if hasVal {
					l.given[f.Names()[0]] = val
				} else {
					l.awaiting = f.Names()[0]
				}
			}
		case l.args == 0 && l.cmd.Command(w) != nil:
			l.cmd = l.cmd.Command(w)
			l.path = append([]*cli.Command{l.cmd}, l.path...)
		default:
			l.args++
			continue
		}
		l.flags = append(l.flags, w)
	}
	return l
}

// flagNamed is the flag with name of a command of path.
func flagNamed(path []*cli.Command, name string) cli.Flag {
	for _, p := range path {
		for _, f := range p.Flags {
			if slices.Contains(f.Names(), name) {
				return f
			}
		}
	}
	return nil
}

// takesValue reports whether f needs a value (not a boolean switch).
func takesValue(f cli.Flag) bool {
	v, ok := f.(interface{ TakesValue() bool })
	return ok && v.TakesValue()
}

// flagValues are the values of flag name: endpoint names, the output
// modes, dead-letter reasons, pending states.
func (a *app) flagValues(ctx context.Context, name string, given map[string]string) []string {
	switch name {
	case "endpoint":
		return a.remote(ctx, given, endpointNames)
	case "output":
		return []string{"table", "wide", "json"}
	case "reason":
		var out []string
		for _, r := range policy.DeadLetterReasons {
			out = append(out, string(r))
		}
		return out
	case "state":
		return []string{string(policy.Scheduled), string(policy.Held), string(policy.InFlight)}
	}
	return nil
}

// argValues are the arguments the innermost command of path takes: endpoint names (endpoints
// enable, disable, reset), dead-letter ids (dead-letters get and discard,
// replay; of --endpoint when given), replay job ids (replay-jobs get and
// cancel), pending callout ids (callouts get).
func (a *app) argValues(ctx context.Context, path []*cli.Command, given map[string]string) []string {
	names := make([]string, len(path))
	for i, c := range path {
		names[len(path)-1-i] = c.Name
	}
	switch strings.Join(names[1:], " ") {
	case "endpoints enable", "endpoints disable", "endpoints reset":
		return a.remote(ctx, given, endpointNames)
	case "dead-letters get", "dead-letters discard", "replay":
		return a.remote(ctx, given, deadLetterIDs)
	case "replay-jobs get", "replay-jobs cancel":
		return a.remote(ctx, given, jobIDs)
	case "callouts get":
		return a.remote(ctx, given, pendingIDs)
	}
	return nil
}

// remote runs list against the admin API of the line's --server and
// --token (else the environment's, as every command reads them) within
// completionTimeout; nothing when there is no token or the server fails.
func (a *app) remote(ctx context.Context, given map[string]string,
	list func(context.Context, *client, map[string]string) ([]string, error)) []string {
	server, token := given["server"], given["token"]
	for _, k := range []string{envServer, envServerAlias} {
		if server == "" {
			server = a.getenv(k)
		}
	}
	if token == "" {
		token = a.getenv(envToken)
	}
	cl, err := a.newClient(server, token)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	out, _ := list(ctx, cl, given)
	return out
}

// ids GETs path with q as an L and returns the id of each of its items.
func ids[L, I any](ctx context.Context, cl *client, path string, q url.Values, items func(L) []I,
	id func(I) string) ([]string, error) {
	var l L
	_, _, err := cl.call(ctx, "GET", path, q, nil, &l)
	var out []string
	for _, it := range items(l) {
		out = append(out, id(it))
	}
	return out, err
}

// endpointNames are the configured endpoints' names.
func endpointNames(ctx context.Context, cl *client, _ map[string]string) ([]string, error) {
	return ids(ctx, cl, "endpoints", nil, func(l api.EndpointList) []api.EndpointDoc { return l.Endpoints },
		func(e api.EndpointDoc) string { return e.Name })
}

// deadLetterIDs are the ids of the first page of dead letters (of the
// line's --endpoint when given).
func deadLetterIDs(ctx context.Context, cl *client, given map[string]string) ([]string, error) {
	q := url.Values{"limit": {"200"}}
	if e := given["endpoint"]; e != "" {
		q.Set("endpoint", e)
	}
	return ids(ctx, cl, "dead-letters", q, func(l api.DeadLetterList) []api.DeadLetterSummaryDoc { return l.Items },
		func(d api.DeadLetterSummaryDoc) string { return d.ID })
}

// jobIDs are the ids of the recent replay jobs.
func jobIDs(ctx context.Context, cl *client, _ map[string]string) ([]string, error) {
	return ids(ctx, cl, "replay-jobs", url.Values{"limit": {"50"}}, func(l api.ReplayJobList) []api.ReplayJob { return l.Jobs },
		func(j api.ReplayJob) string { return j.ID })
}

// pendingIDs are the ids of the first page of each pending state of every
// endpoint with a backlog.
func pendingIDs(ctx context.Context, cl *client, _ map[string]string) ([]string, error) {
	eps, err := pendingEndpoints(ctx, cl)
	var out []string
	for _, ep := range eps {
		for _, st := range []policy.State{policy.Scheduled, policy.Held, policy.InFlight} {
			q := url.Values{"endpoint": {ep}, "state": {string(st)}, "limit": {"100"}}
			page, err := ids(ctx, cl, "callouts", q, func(l api.CalloutList) []api.CalloutSummaryDoc { return l.Items },
				func(c api.CalloutSummaryDoc) string { return c.ID })
			if out = append(out, page...); err != nil {
				return out, err
			}
		}
	}
	return out, err
}
