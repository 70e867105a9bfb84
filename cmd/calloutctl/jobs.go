package main

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
)

func (a *app) replayJobsCommand() *cli.Command {
	return &cli.Command{
		Name:  "replay-jobs",
		Usage: "follow, list and cancel replay jobs",
		Commands: []*cli.Command{
			{Name: "list", Usage: "list recent replay jobs, newest first",
				Flags:  append([]cli.Flag{&cli.IntFlag{Name: "limit", Value: 20, Usage: "jobs to list"}}, watchFlags()...),
				Action: a.watchable(a.listJobs)},
			{Name: "get", Usage: "show a replay job's progress", ArgsUsage: "ID",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "items", Usage: "also list its dead letters and what became of each"},
					&cli.BoolFlag{Name: "wait", Usage: "follow it until it ends, with a progress bar"},
				},
				Action: a.getJob},
			{Name: "cancel", Usage: "stop a replay job before its next send; says how many were sent",
				ArgsUsage: "ID", Flags: []cli.Flag{yesFlag()}, Action: a.cancelJob},
		},
	}
}

// listJobs is `replay-jobs list`.
func (a *app) listJobs(ctx context.Context, c *cli.Command) error {
	cl, asJSON, err := a.setup(c)
	if err != nil {
		return err
	}
	var l api.ReplayJobList
	raw, _, err := cl.call(ctx, "GET", "replay-jobs", url.Values{"limit": {strconv.Itoa(c.Int("limit"))}}, nil, &l)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(a.stdout, raw, nil)
	}
	wide := wideOutput(c)
	t := newTable(a.stdout, wide, col("ID", 0), col("STATE", 0), col("CREATED", 0), col("TOTAL", 0),
		col("SENT", 0), col("SKIPPED", 0), col("REFUSED", 0), col("FAILED", 0), wideCol("DRY-RUN"),
		wideCol("WOULD-SEND"), wideCol("RATE"), wideCol("CREATED-BY"))
	for _, j := range l.Jobs {
		state, sent := string(j.State), j.Sent
		if j.DryRun {
			// A dry run sends nothing: its SENT is what it would send.
			sent = j.WouldSend
			if j.State == policy.JobCompleted {
				state = "dry-run"
			}
		}
		t.row(j.ID, state, a.when(wide, j.CreatedAt), strconv.Itoa(j.Total), strconv.Itoa(sent),
			strconv.Itoa(j.Skipped), strconv.Itoa(j.Refused), strconv.Itoa(j.Failed),
			strconv.FormatBool(j.DryRun), strconv.Itoa(j.WouldSend), strconv.FormatFloat(j.Rate, 'g', -1, 64)+"/s",
			j.CreatedBy)
	}
	return t.flush()
}

// getJob is `replay-jobs get ID`.
func (a *app) getJob(ctx context.Context, c *cli.Command) error {
	id, cl, asJSON, err := a.setupArg(c, "job ID")
	if err != nil {
		return err
	}
	if c.Bool("wait") {
		return a.follow(ctx, cl, asJSON, id)
	}
	var j api.ReplayJob
	raw, _, err := cl.call(ctx, "GET", "replay-jobs/"+url.PathEscape(id), nil, nil, &j)
	if err != nil {
		return err
	}
	var items []api.ReplayJobItemDoc
	if c.Bool("items") {
		if items, err = a.items(ctx, cl, id); err != nil {
			return err
		}
	}
	if asJSON {
		if !c.Bool("items") {
			return writeJSON(a.stdout, raw, nil)
		}
		return writeJSON(a.stdout, nil, map[string]any{"job": j, "items": orEmpty(items)})
	}
	if err := a.printJob(j); err != nil {
		return err
	}
	if c.Bool("items") {
		a.printf("\n")
		return a.itemTable(items, wideOutput(c))
	}
	return nil
}

// printJob writes a job as fields.
func (a *app) printJob(j api.ReplayJob) error {
	t := newTable(a.stdout, false, col("FIELD", 0), col("VALUE", 0))
	t.row("id", j.ID)
	t.row("state", string(j.State))
	t.row("phase", string(j.Phase))
	t.row("dry run", strconv.FormatBool(j.DryRun))
	t.row("rate", strconv.FormatFloat(j.Rate, 'g', -1, 64)+"/s")
	for i, f := range j.Filters {
		t.row("filter "+strconv.Itoa(i+1), strings.TrimSuffix(strings.TrimPrefix(describe(api.ReplayJobSpec{Filters: []api.ReplayFilter{f}}), " ("), ")"))
	}
	if j.IDCount > 0 {
		t.row("ids", strconv.Itoa(j.IDCount))
	}
	t.row("created by", j.CreatedBy)
	t.row("created", a.stamp(j.CreatedAt))
	t.row("finished", a.stampp(j.FinishedAt))
	t.row("cancelled by", j.CancelledBy)
	sent := fmt.Sprintf("%d sent", j.Sent)
	if j.DryRun {
		sent = fmt.Sprintf("%d would be sent", j.WouldSend)
	}
	t.row("progress", fmt.Sprintf("%d of %d: %s, %d skipped, %d refused, %d failed",
		j.Done, j.Total, sent, j.Skipped, j.Refused, j.Failed))
	t.row("error", j.Error)
	return t.flush()
}

// items reads every item of job id.
func (a *app) items(ctx context.Context, cl *client, id string) ([]api.ReplayJobItemDoc, error) {
	var out []api.ReplayJobItemDoc
	offset := 0
	for {
		var page api.ReplayJobItems
		q := url.Values{"offset": {strconv.Itoa(offset)}, "limit": {"1000"}}
		if _, _, err := cl.call(ctx, "GET", "replay-jobs/"+url.PathEscape(id)+"/items", q, nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
		if page.NextOffset == 0 {
			return out, nil
		}
		offset = page.NextOffset
	}
}

// itemTable writes job items with their dead letters' summaries.
func (a *app) itemTable(items []api.ReplayJobItemDoc, wide bool) error {
	t := newTable(a.stdout, wide, col("DEAD-LETTER", 0), col("ENDPOINT", 14), col("DEAD-LETTERED", 0),
		col("STATUS", 0), col("RESULT", 28), wideCol("REASON"), wideCol("REQUEST"), wideCol("IDEMPOTENCY-KEY"),
		wideCol("REPLAY"))
	for _, it := range items {
		d := it.DeadLetter
		if d == nil {
			d = &api.DeadLetterSummaryDoc{}
		}
		req, st := "", ""
		if d.Method != "" {
			req = d.Method + " " + d.Path
		}
		if d.ID != "" {
			st = status(d.Status)
		}
		t.row(it.DeadLetterID, d.Endpoint, a.when(wide, d.DeadLetteredAt), st, itemResult(it), string(d.Reason),
			req, d.IdempotencyKey, it.ReplayID)
	}
	return t.flush()
}

// itemResult is an item's RESULT cell: "sent", "would_send (held)",
// "skipped (already_replayed)".
func itemResult(it api.ReplayJobItemDoc) string {
	if it.Detail == "" {
		return string(it.Status)
	}
	return string(it.Status) + " (" + it.Detail + ")"
}

// cancelJob is `replay-jobs cancel ID`: it asks the job to stop, waits
// until it has, and says how many were sent.
func (a *app) cancelJob(ctx context.Context, c *cli.Command) error {
	id, cl, asJSON, err := a.setupArg(c, "job ID")
	if err != nil {
		return err
	}
	var j api.ReplayJob
	if _, _, err := cl.call(ctx, "POST", "replay-jobs/"+url.PathEscape(id)+"/cancel", nil, nil, &j); err != nil {
		return err
	}
	ended := j.State == policy.JobCompleted || j.State == policy.JobFailed
	if !j.State.Final() {
		if j, err = a.wait(ctx, cl, id, nil); err != nil {
			return err
		}
	}
	if ended {
		return withCode(exitRefused, fmt.Errorf("replay job %s had already %s; nothing to cancel", id, j.State))
	}
	if asJSON {
		return writeJSON(a.stdout, nil, j)
	}
	a.printf("%s\n", summary(j, nil))
	return nil
}

// maxBreakdown is the most items follow reads to say which dead letters
// were skipped or refused and why, and which were held behind a shut gate.
const maxBreakdown = 10_000

// follow waits for job id to end, with a progress bar while it sends, and
// reports it. Exit 0 when every dead letter that should have been sent was
// (skips are the end state asked for: already replayed, superseded by a
// newer dead letter, gone), 5 when some were refused or failed or it was
// cancelled part-way, 1 when it failed; a warning names the endpoints that
// hold replays behind a shut gate.
func (a *app) follow(ctx context.Context, cl *client, asJSON bool, id string) error {
	var bar *progress
	j, err := a.wait(ctx, cl, id, func(j api.ReplayJob) {
		if bar == nil && (j.Phase == policy.PhaseSend || j.State.Final()) && j.Total > 0 && !j.DryRun {
			bar = a.newProgress(j.Total, "replaying")
		}
		bar.set(j.Done)
	})
	bar.finish()
	if err != nil {
		if ctx.Err() != nil {
			a.notef("stopped waiting; replay job %s goes on (calloutctl replay-jobs cancel %s stops it)\n", id, id)
		}
		return err
	}
	var items []api.ReplayJobItemDoc
	if j.Total > 0 && j.Total <= maxBreakdown {
		if items, err = a.items(ctx, cl, j.ID); err != nil {
			return err
		}
	}
	if asJSON {
		if err := writeJSON(a.stdout, nil, j); err != nil {
			return err
		}
	} else {
		a.printf("%s\n", summary(j, items))
	}
	if eps := heldEndpoints(items); len(eps) > 0 {
		a.warnShut(ctx, cl, eps)
	}
	switch {
	case j.State == policy.JobFailed:
		return fmt.Errorf("replay job %s failed: %s", j.ID, j.Error)
	case j.State == policy.JobCancelled:
		return withCode(exitPartial, fmt.Errorf("cancelled part-way: %d of %d dead letters not sent", j.Total-j.Done, j.Total))
	case j.Refused+j.Failed > 0:
		return withCode(exitPartial, fmt.Errorf("partially done: %d refused, %d failed of %d (see replay-jobs get %s --items)",
			j.Refused, j.Failed, j.Total, j.ID))
	}
	return nil
}

// heldEndpoints are the endpoints of items sent (or that would be sent)
// into a shut gate: held, not sent yet.
func heldEndpoints(items []api.ReplayJobItemDoc) []string {
	var out []string
	for _, it := range items {
		if it.Detail == "held" && it.DeadLetter != nil && !slices.Contains(out, it.DeadLetter.Endpoint) {
			out = append(out, it.DeadLetter.Endpoint)
		}
	}
	return out
}

// wait polls job id every pollEvery until it ends, calling seen (when not
// nil) with each reading.
func (a *app) wait(ctx context.Context, cl *client, id string, seen func(api.ReplayJob)) (api.ReplayJob, error) {
	t := time.NewTicker(a.pollEvery)
	defer t.Stop()
	for {
		var j api.ReplayJob
		if _, _, err := cl.call(ctx, "GET", "replay-jobs/"+url.PathEscape(id), nil, nil, &j); err != nil {
			return j, err
		}
		if seen != nil {
			seen(j)
		}
		if j.State.Final() {
			return j, nil
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-t.C:
		}
	}
}

// summary is one line saying how a job ended, with why dead letters were
// skipped or refused when items (the job's, or nil) say.
func summary(j api.ReplayJob, items []api.ReplayJobItemDoc) string {
	s := fmt.Sprintf("replay job %s %s", j.ID, j.State)
	if j.CancelledBy != "" {
		s += " by " + j.CancelledBy
	}
	why := breakdown(items)
	if j.DryRun {
		s += fmt.Sprintf(": dry run, %d of %d would be sent", j.WouldSend, j.Total)
	} else {
		s += fmt.Sprintf(": %d of %d sent", j.Sent, j.Total)
	}
	if j.Skipped+j.Refused+j.Failed > 0 {
		s += fmt.Sprintf(" (%d skipped, %d refused, %d failed", j.Skipped, j.Refused, j.Failed)
		if why != "" {
			s += ": " + why
		}
		s += ")"
	}
	if !j.DryRun && j.State == policy.JobCompleted && j.Sent == 0 && j.Refused+j.Failed == 0 && j.Total > 0 {
		s += "; nothing left to replay"
	}
	if j.Error != "" {
		s += ": " + j.Error
	}
	return s
}

// breakdown counts items that were not sent by result: "already_replayed
// 2, superseded 1, endpoint_disabled 3".
func breakdown(items []api.ReplayJobItemDoc) string {
	counts := map[string]int{}
	var order []string
	for _, it := range items {
		if it.Status == policy.ItemSent || it.Status == policy.ItemWouldSend || it.Detail == "" {
			continue
		}
		if counts[it.Detail] == 0 {
			order = append(order, it.Detail)
		}
		counts[it.Detail]++
	}
	parts := make([]string, len(order))
	for i, d := range order {
		parts[i] = d + " " + strconv.Itoa(counts[d])
	}
	return strings.Join(parts, ", ")
}
