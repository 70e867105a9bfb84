package main

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
)

func (a *app) replayCommand() *cli.Command {
	return &cli.Command{
		Name:      "replay",
		Usage:     "replay dead letters: one by id, several by id, or every one matching filters",
		ArgsUsage: "[ID...]",
		Description: "A replay is a new attempt chain with the original request and Idempotency-Key\n" +
			"(contract §8). One ID is replayed at once. Several IDs, or filters, make a replay job on\n" +
			"the server: each dead letter is replayed at most once, paced by --rate, with a\n" +
			"progress bar when stderr is a terminal; it is confirmed first unless --yes (the\n" +
			"question says how many a dry run found would be sent). --dry-run judges every\n" +
			"dead letter by the rules the real run applies (already replayed, superseded by a\n" +
			"newer dead letter, endpoint disabled, ...) and sends nothing. Dead letters already\n" +
			"replayed are skipped, and that is success: a rerun with nothing left exits 0.\n" +
			"Replays into an endpoint whose breaker is open or which is paused are held, not\n" +
			"sent, until it reopens: calloutctl warns. Ctrl-C stops waiting, not the job:\n" +
			"cancel it with `calloutctl replay-jobs cancel ID`.",
		Flags: append(filterFlags(),
			&cli.BoolFlag{Name: "unresolved", Usage: "only dead letters whose replays have not succeeded"},
			&cli.BoolFlag{Name: "dry-run", Usage: "say what the replay would do to each dead letter; send nothing"},
			&cli.FloatFlag{Name: "rate", Value: 10, Usage: "dead letters replayed per second (0.1–1000)"},
			yesFlag(),
			&cli.BoolFlag{Name: "no-wait", Usage: "print the job's id and return at once"}),
		Action: a.replay,
	}
}

// replay is `replay`.
func (a *app) replay(ctx context.Context, c *cli.Command) error {
	cl, asJSON, f, err := a.setupFilter(c)
	if err != nil {
		return err
	}
	ids := c.Args().Slice()
	switch {
	case len(ids) == 0 && filterEmpty(f):
		return usagef("replay: give dead-letter IDs or at least one filter (--endpoint, --since, --until, --status, --reason, --unresolved)")
	case len(ids) > 0 && !filterEmpty(f):
		return usagef("replay: give IDs or filters, not both")
	case len(ids) == 1 && !c.Bool("dry-run"):
		return a.replayOne(ctx, cl, asJSON, ids[0])
	}
	sp := api.ReplayJobSpec{IDs: ids, Rate: c.Float("rate")}
	if len(ids) == 0 {
		sp.Filters = []api.ReplayFilter{f}
	}
	if c.Bool("dry-run") {
		return a.dryRun(ctx, cl, asJSON, wideOutput(c), sp)
	}
	if !c.Bool("yes") {
		counted, items, err := a.count(ctx, cl, sp)
		if err != nil {
			return err
		}
		switch {
		case counted.Total == 0:
			a.notef("no dead letter matches; nothing to replay\n")
			return nil
		case counted.WouldSend == 0:
			a.notef("nothing to replay: none of the %d matching dead letters would be sent (%s)\n",
				counted.Total, breakdown(items))
			return nil
		}
		a.warnShut(ctx, cl, wouldSendEndpoints(items))
		sp.Filters = counted.Filters // the window the count was made over
		q := fmt.Sprintf("Replay %d dead letters%s at %g/s?", counted.WouldSend, describe(sp), sp.Rate)
		if n := counted.Total - counted.WouldSend; n > 0 {
			q = fmt.Sprintf("Replay %d of %d matching dead letters%s at %g/s (%d are skipped: %s)?",
				counted.WouldSend, counted.Total, describe(sp), sp.Rate, n, breakdown(items))
		}
		if err := a.confirm(ctx, q); err != nil {
			return err
		}
	} else if len(f.Endpoints) > 0 {
		a.warnShut(ctx, cl, f.Endpoints)
	}
	var j api.ReplayJob
	if _, _, err := cl.call(ctx, "POST", "replay-jobs", nil, sp, &j); err != nil {
		return err
	}
	if c.Bool("no-wait") {
		a.printf("%s\n", j.ID)
		return nil
	}
	a.notef("replay job %s created by %s; waiting (Ctrl-C stops waiting, not the job)\n", j.ID, j.CreatedBy)
	return a.follow(ctx, cl, asJSON, j.ID)
}

// replayOne replays one dead letter at once. A dead letter already
// replayed (its key held by a chain that has not dead-lettered) is the end
// state asked for: it says so and exits 0.
func (a *app) replayOne(ctx context.Context, cl *client, asJSON bool, id string) error {
	var r api.ReplayResultDoc
	raw, _, err := cl.call(ctx, "POST", "dead-letters/"+url.PathEscape(id)+"/replay", nil, nil, &r)
	if err != nil {
		return err
	}
	switch {
	case asJSON:
		if err := writeJSON(a.stdout, raw, nil); err != nil {
			return err
		}
	case r.Created:
		a.printf("replayed %s as %s (%s)\n", id, r.ReplayID, r.State)
	default:
		a.printf("%s was already replayed as %s (%s); nothing sent\n", id, r.ReplayID, r.State)
	}
	if r.Created && r.State == policy.Held {
		a.warnShut(ctx, cl, []string{r.Endpoint})
	}
	return nil
}

// count runs a dry-run job of sp and returns it with its items: what the
// real run would do with each dead letter.
func (a *app) count(ctx context.Context, cl *client, sp api.ReplayJobSpec) (api.ReplayJob, []api.ReplayJobItemDoc, error) {
	sp.DryRun = true
	var j api.ReplayJob
	if _, _, err := cl.call(ctx, "POST", "replay-jobs", nil, sp, &j); err != nil {
		return j, nil, err
	}
	j, err := a.wait(ctx, cl, j.ID, nil)
	if err != nil {
		return j, nil, err
	}
	if j.State != policy.JobCompleted {
		return j, nil, fmt.Errorf("dry run %s %s: %s", j.ID, j.State, j.Error)
	}
	items, err := a.items(ctx, cl, j.ID)
	return j, items, err
}

// dryRun says what sp would do to each dead letter, sending nothing: the
// server judged each by the real run's rules.
func (a *app) dryRun(ctx context.Context, cl *client, asJSON, wide bool, sp api.ReplayJobSpec) error {
	j, items, err := a.count(ctx, cl, sp)
	if err != nil {
		return err
	}
	var would []api.ReplayJobItemDoc
	for _, it := range items {
		if it.Status == policy.ItemWouldSend {
			would = append(would, it)
		}
	}
	if asJSON {
		return writeJSON(a.stdout, nil, map[string]any{"job": j, "items": orEmpty(items), "would_replay": orEmpty(would)})
	}
	if len(items) > 0 {
		if err := a.itemTable(items, wide); err != nil {
			return err
		}
	}
	a.warnShut(ctx, cl, wouldSendEndpoints(items))
	line := fmt.Sprintf("dry run: %d of %d dead letters would be replayed at %g/s", j.WouldSend, j.Total, sp.Rate)
	if n := j.Total - j.WouldSend; n > 0 {
		line += fmt.Sprintf("; %d would not (%s)", n, breakdown(items))
	}
	a.printf("%s; nothing was sent\n", line)
	return nil
}

// wouldSendEndpoints are the endpoints of the items a replay would send.
func wouldSendEndpoints(items []api.ReplayJobItemDoc) []string {
	var out []string
	for _, it := range items {
		if it.Status == policy.ItemWouldSend && it.DeadLetter != nil && !slices.Contains(out, it.DeadLetter.Endpoint) {
			out = append(out, it.DeadLetter.Endpoint)
		}
	}
	return out
}

// warnShut warns, on stderr, of each endpoint of names whose gate is shut:
// replays into it are held, not sent, until it reopens (contract §4, §6). An
// endpoint that cannot be read is left out: the warning is advice.
func (a *app) warnShut(ctx context.Context, cl *client, names []string) {
	for _, n := range names {
		var e api.EndpointDoc
		if _, _, err := cl.call(ctx, "GET", "endpoints/"+url.PathEscape(n), nil, nil, &e); err != nil {
			continue
		}
		now := a.now()
		switch e.Gate {
		case policy.GateBreakerOpen, policy.GateProbing:
			when := ""
			if e.NextProbeAt != nil {
				when = fmt.Sprintf(" (next probe %s, %s)", ts(*e.NextProbeAt), rel(*e.NextProbeAt, now))
			}
			a.notef("warning: %s's circuit breaker is open%s: its replays are held, not sent, until the breaker "+
				"closes (calloutctl endpoints reset %s closes it now)\n", n, when, n)
		case policy.GatePaused:
			when := ""
			if e.PausedUntil != nil {
				when = fmt.Sprintf(" until %s (%s)", ts(*e.PausedUntil), rel(*e.PausedUntil, now))
			}
			a.notef("warning: %s is paused by a 429 Retry-After%s: its replays are held, not sent, until then\n", n, when)
		case policy.GateDisabled:
			a.notef("warning: %s is disabled: its replays are refused (calloutctl endpoints enable %s)\n", n, n)
		}
	}
}

// orEmpty is s, or an empty slice for JSON's sake.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// describe says what a job's filters select, for the confirmation.
func describe(sp api.ReplayJobSpec) string {
	if len(sp.Filters) == 0 {
		return ""
	}
	f := sp.Filters[0]
	var parts []string
	if len(f.Endpoints) > 0 {
		parts = append(parts, "of "+strings.Join(f.Endpoints, ", "))
	}
	if !f.Since.IsZero() {
		parts = append(parts, "since "+ts(f.Since))
	}
	if !f.Until.IsZero() {
		parts = append(parts, "until "+ts(f.Until))
	}
	if len(f.Statuses) > 0 {
		parts = append(parts, "status "+statusList(f.Statuses))
	}
	if len(f.Reasons) > 0 {
		reasons := make([]string, len(f.Reasons))
		for i, r := range f.Reasons {
			reasons[i] = string(r)
		}
		parts = append(parts, "reason "+strings.Join(reasons, ", "))
	}
	if f.Unresolved {
		parts = append(parts, "unresolved")
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
