package main

import (
	"context"
	"fmt"
	"net/url"
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
			"(SPEC §8). One ID is replayed at once. Several IDs, or filters, make a replay job on\n" +
			"the server: each dead letter is replayed at most once, paced by --rate, with a\n" +
			"progress bar when stderr is a terminal; it is confirmed first unless --yes (the\n" +
			"question says how many a dry run found). Ctrl-C stops waiting, not the job: cancel\n" +
			"it with `calloutctl replay-jobs cancel ID`.",
		Flags: append(filterFlags(),
			&cli.BoolFlag{Name: "dry-run", Usage: "list what would be replayed; send nothing"},
			&cli.FloatFlag{Name: "rate", Value: 10, Usage: "dead letters replayed per second (0.1–1000)"},
			&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "do not ask for confirmation"},
			&cli.BoolFlag{Name: "no-wait", Usage: "print the job's id and return at once"}),
		Action: a.replay,
	}
}

// replay is `replay`.
func (a *app) replay(ctx context.Context, c *cli.Command) error {
	cl, asJSON, err := a.setup(c)
	if err != nil {
		return err
	}
	f, err := a.filterOf(c)
	if err != nil {
		return err
	}
	ids := c.Args().Slice()
	switch {
	case len(ids) == 0 && filterEmpty(f):
		return usagef("replay: give dead-letter IDs or at least one filter (--endpoint, --since, --until, --status, --reason)")
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
		return a.dryRun(ctx, cl, asJSON, sp)
	}
	if !c.Bool("yes") {
		counted, err := a.count(ctx, cl, sp)
		if err != nil {
			return err
		}
		if counted.Total == 0 {
			a.notef("no dead letter matches; nothing to replay\n")
			return nil
		}
		sp.Filters = counted.Filters // the window the count was made over
		if err := a.confirm(fmt.Sprintf("Replay %d dead letters%s at %g/s?", counted.Total, describe(sp), sp.Rate)); err != nil {
			return err
		}
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

// replayOne replays one dead letter at once.
func (a *app) replayOne(ctx context.Context, cl *client, asJSON bool, id string) error {
	var r api.ReplayResultDoc
	raw, _, err := cl.call(ctx, "POST", "dead-letters/"+url.PathEscape(id)+"/replay", nil, nil, &r)
	if err != nil {
		return err
	}
	if asJSON {
		if err := writeJSON(a.stdout, raw, nil); err != nil {
			return err
		}
	} else if r.Created {
		a.printf("replayed %s as %s (%s)\n", id, r.ReplayID, r.State)
	} else {
		a.printf("%s was already replayed as %s (%s); nothing sent\n", id, r.ReplayID, r.State)
	}
	if !r.Created {
		return withCode(exitRefused, fmt.Errorf("%s: already replayed as %s", id, r.ReplayID))
	}
	return nil
}

// count runs a dry-run job of sp to count what it would replay.
func (a *app) count(ctx context.Context, cl *client, sp api.ReplayJobSpec) (api.ReplayJob, error) {
	sp.DryRun = true
	var j api.ReplayJob
	if _, _, err := cl.call(ctx, "POST", "replay-jobs", nil, sp, &j); err != nil {
		return j, err
	}
	return a.wait(ctx, cl, j.ID, nil)
}

// dryRun lists what sp would replay, sending nothing.
func (a *app) dryRun(ctx context.Context, cl *client, asJSON bool, sp api.ReplayJobSpec) error {
	j, err := a.count(ctx, cl, sp)
	if err != nil {
		return err
	}
	items, err := a.items(ctx, cl, j.ID)
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
		return writeJSON(a.stdout, nil, map[string]any{"job": j, "would_replay": orEmpty(would)})
	}
	if err := a.itemTable(would); err != nil {
		return err
	}
	a.printf("dry run: %d dead letters would be replayed at %g/s; nothing was sent\n", len(would), sp.Rate)
	return nil
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
		parts = append(parts, fmt.Sprintf("status %v", f.Statuses))
	}
	if len(f.Reasons) > 0 {
		reasons := make([]string, len(f.Reasons))
		for i, r := range f.Reasons {
			reasons[i] = string(r)
		}
		parts = append(parts, "reason "+strings.Join(reasons, ", "))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
