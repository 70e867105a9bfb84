package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
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
				Flags:  []cli.Flag{&cli.IntFlag{Name: "limit", Value: 20, Usage: "jobs to list"}},
				Action: a.listJobs},
			{Name: "get", Usage: "show a replay job's progress", ArgsUsage: "ID",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "items", Usage: "also list its dead letters and what became of each"},
					&cli.BoolFlag{Name: "wait", Usage: "follow it until it ends, with a progress bar"},
				},
				Action: a.getJob},
			{Name: "cancel", Usage: "stop a replay job before its next send; says how many were sent",
				ArgsUsage: "ID", Action: a.cancelJob},
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
	t := newTable(a.stdout, "ID", "STATE", "DRY-RUN", "RATE", "CREATED-BY", "CREATED", "TOTAL", "SENT",
		"SKIPPED", "REFUSED", "FAILED")
	for _, j := range l.Jobs {
		t.row(j.ID, string(j.State), strconv.FormatBool(j.DryRun), strconv.FormatFloat(j.Rate, 'g', -1, 64),
			j.CreatedBy, ts(j.CreatedAt), strconv.Itoa(j.Total), strconv.Itoa(j.Sent),
			strconv.Itoa(j.Skipped), strconv.Itoa(j.Refused), strconv.Itoa(j.Failed))
	}
	return t.flush()
}

// getJob is `replay-jobs get ID`.
func (a *app) getJob(ctx context.Context, c *cli.Command) error {
	id, err := oneArg(c, "job ID")
	if err != nil {
		return err
	}
	cl, asJSON, err := a.setup(c)
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
		return a.itemTable(items)
	}
	return nil
}

// printJob writes a job as fields.
func (a *app) printJob(j api.ReplayJob) error {
	t := newTable(a.stdout, "FIELD", "VALUE")
	t.row("id", j.ID)
	t.row("state", string(j.State))
	t.row("phase", string(j.Phase))
	t.row("dry run", strconv.FormatBool(j.DryRun))
	t.row("rate", strconv.FormatFloat(j.Rate, 'g', -1, 64)+"/s")
	for i, f := range j.Filters {
		t.row("filter "+strconv.Itoa(i+1), describe(api.ReplayJobSpec{Filters: []api.ReplayFilter{f}}))
	}
	if j.IDCount > 0 {
		t.row("ids", strconv.Itoa(j.IDCount))
	}
	t.row("created by", j.CreatedBy)
	t.row("created", ts(j.CreatedAt))
	t.row("finished", tsp(j.FinishedAt))
	t.row("cancelled by", j.CancelledBy)
	t.row("progress", fmt.Sprintf("%d of %d: %d sent, %d skipped, %d refused, %d failed",
		j.Done, j.Total, j.Sent, j.Skipped, j.Refused, j.Failed))
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
func (a *app) itemTable(items []api.ReplayJobItemDoc) error {
	t := newTable(a.stdout, "DEAD-LETTER", "ENDPOINT", "DEAD-LETTERED", "STATUS", "REASON", "REQUEST",
		"IDEMPOTENCY-KEY", "RESULT", "REPLAY")
	for _, it := range items {
		d := it.DeadLetter
		if d == nil {
			d = &api.DeadLetterSummaryDoc{}
		}
		result := string(it.Status)
		if it.Detail != "" {
			result += " (" + it.Detail + ")"
		}
		req := ""
		if d.Method != "" {
			req = d.Method + " " + d.Path
		}
		st := ""
		if d.ID != "" {
			st = status(d.Status)
		}
		t.row(it.DeadLetterID, d.Endpoint, ts(d.DeadLetteredAt), st, string(d.Reason), req, d.IdempotencyKey,
			result, it.ReplayID)
	}
	return t.flush()
}

// cancelJob is `replay-jobs cancel ID`: it asks the job to stop, waits
// until it has, and says how many were sent.
func (a *app) cancelJob(ctx context.Context, c *cli.Command) error {
	id, err := oneArg(c, "job ID")
	if err != nil {
		return err
	}
	cl, asJSON, err := a.setup(c)
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
	if asJSON {
		if err := writeJSON(a.stdout, nil, j); err != nil {
			return err
		}
	} else {
		a.printf("%s\n", summary(j))
	}
	if ended {
		return withCode(exitRefused, fmt.Errorf("replay job %s had already %s; nothing to cancel", id, j.State))
	}
	return nil
}

// follow waits for job id to end, with a progress bar while it sends, and
// reports it: exit 0 when every dead letter was sent, 5 when some were not
// or it was cancelled part-way, 1 when it failed.
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
	if asJSON {
		if err := writeJSON(a.stdout, nil, j); err != nil {
			return err
		}
	} else {
		a.printf("%s\n", summary(j))
	}
	switch {
	case j.State == policy.JobFailed:
		return fmt.Errorf("replay job %s failed: %s", j.ID, j.Error)
	case j.State == policy.JobCancelled:
		return withCode(exitPartial, fmt.Errorf("cancelled part-way: %d of %d dead letters not sent", j.Total-j.Sent, j.Total))
	case j.Sent < j.Total:
		return withCode(exitPartial, fmt.Errorf("partially done: %d of %d dead letters not sent (see replay-jobs get %s --items)",
			j.Total-j.Sent, j.Total, j.ID))
	}
	return nil
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

// summary is one line saying how a job ended.
func summary(j api.ReplayJob) string {
	s := fmt.Sprintf("replay job %s %s", j.ID, j.State)
	if j.CancelledBy != "" {
		s += " by " + j.CancelledBy
	}
	if j.DryRun {
		return s + fmt.Sprintf(": dry run, %d would be replayed", j.Total)
	}
	s += fmt.Sprintf(": %d of %d sent", j.Sent, j.Total)
	if j.Skipped+j.Refused+j.Failed > 0 {
		s += fmt.Sprintf(" (%d skipped, %d refused, %d failed)", j.Skipped, j.Refused, j.Failed)
	}
	if j.Error != "" {
		s += ": " + j.Error
	}
	return s
}
