package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
)

// filterFlags are the dead-letter filters of SPEC §8, shared by
// `dead-letters list` and `replay`.
func filterFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "endpoint", Usage: "endpoint name (repeat or comma-separate for several)"},
		&cli.StringFlag{Name: "since", Usage: "dead-lettered at or after this time"},
		&cli.StringFlag{Name: "until", Usage: "dead-lettered at or before this time"},
		&cli.IntSliceFlag{Name: "status", Usage: "last upstream status code (0: no response); repeatable"},
		&cli.StringSliceFlag{Name: "reason", Usage: "exhausted, permanent, ambiguous or endpoint_disabled; repeatable"},
	}
}

// filterOf reads the filter flags of c.
func (a *app) filterOf(c *cli.Command) (api.ReplayFilter, error) {
	f := api.ReplayFilter{Endpoints: c.StringSlice("endpoint"), Statuses: c.IntSlice("status")}
	for _, r := range c.StringSlice("reason") {
		f.Reasons = append(f.Reasons, policy.DeadLetterReason(r))
	}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		t, err := parseTime(p.name, c.String(p.name), a.now())
		if err != nil {
			return f, err
		}
		*p.dst = t
	}
	return f, nil
}

// filterEmpty reports whether f selects everything.
func filterEmpty(f api.ReplayFilter) bool {
	return len(f.Endpoints) == 0 && f.Since.IsZero() && f.Until.IsZero() && len(f.Statuses) == 0 &&
		len(f.Reasons) == 0
}

// filterQuery is f as the list query parameters of GET /admin/v1/dead-letters.
func filterQuery(f api.ReplayFilter) url.Values {
	q := url.Values{}
	for _, e := range f.Endpoints {
		q.Add("endpoint", e)
	}
	for _, s := range f.Statuses {
		q.Add("status", strconv.Itoa(s))
	}
	for _, r := range f.Reasons {
		q.Add("reason", string(r))
	}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	if !f.Until.IsZero() {
		q.Set("until", f.Until.UTC().Format(time.RFC3339Nano))
	}
	return q
}

func (a *app) deadLettersCommand() *cli.Command {
	return &cli.Command{
		Name:  "dead-letters",
		Usage: "list, show and discard dead letters",
		Commands: []*cli.Command{
			{
				Name:  "list",
				Usage: "list dead letters, by endpoint then oldest first",
				Flags: append(filterFlags(),
					&cli.IntFlag{Name: "limit", Value: 50, Usage: "dead letters per page (1–1000)"},
					&cli.StringFlag{Name: "cursor", Usage: "the next page's cursor, as printed after a page"},
					&cli.BoolFlag{Name: "all", Usage: "follow every page"}),
				Action: a.listDeadLetters,
			},
			{Name: "get", Usage: "show one dead letter: request, attempts, last response (redacted)",
				ArgsUsage: "ID", Action: a.getCallout("dead-letters")},
			{
				Name: "discard", Usage: "delete dead letters from the proxy's store", ArgsUsage: "ID...",
				Flags:  []cli.Flag{&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "do not ask for confirmation"}},
				Action: a.discardDeadLetters,
			},
		},
	}
}

// listDeadLetters is `dead-letters list`.
func (a *app) listDeadLetters(ctx context.Context, c *cli.Command) error {
	cl, asJSON, err := a.setup(c)
	if err != nil {
		return err
	}
	f, err := a.filterOf(c)
	if err != nil {
		return err
	}
	q := filterQuery(f)
	q.Set("limit", strconv.Itoa(c.Int("limit")))
	cursor := c.String("cursor")
	var all api.DeadLetterList
	for {
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page api.DeadLetterList
		if _, _, err := cl.call(ctx, "GET", "dead-letters", q, nil, &page); err != nil {
			return err
		}
		all.Items = append(all.Items, page.Items...)
		all.NextCursor, cursor = page.NextCursor, page.NextCursor
		if !c.Bool("all") || cursor == "" {
			break
		}
	}
	if all.Items == nil {
		all.Items = []api.DeadLetterSummaryDoc{}
	}
	if asJSON {
		return writeJSON(a.stdout, nil, all)
	}
	t := newTable(a.stdout, "ID", "ENDPOINT", "DEAD-LETTERED", "REASON", "STATUS", "REQUEST", "ATTEMPTS",
		"IDEMPOTENCY-KEY", "REPLAYED-BY")
	for _, d := range all.Items {
		t.row(d.ID, d.Endpoint, ts(d.DeadLetteredAt), string(d.Reason), status(d.Status), d.Method+" "+d.Path,
			strconv.Itoa(d.Attempts), d.IdempotencyKey, d.ReplayedBy)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if all.NextCursor != "" {
		a.notef("more dead letters: --cursor %s (or --all)\n", all.NextCursor)
	}
	return nil
}

// getCallout is `dead-letters get ID` (route "dead-letters") and
// `callouts get ID` (route "callouts").
func (a *app) getCallout(route string) cli.ActionFunc {
	return func(ctx context.Context, c *cli.Command) error {
		id, err := oneArg(c, "ID")
		if err != nil {
			return err
		}
		cl, asJSON, err := a.setup(c)
		if err != nil {
			return err
		}
		var d api.CalloutDoc
		raw, _, err := cl.call(ctx, "GET", route+"/"+url.PathEscape(id), nil, nil, &d)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(a.stdout, raw, nil)
		}
		return a.printCallout(d)
	}
}

// printCallout writes a callout document as fields, then its attempts.
func (a *app) printCallout(d api.CalloutDoc) error {
	t := newTable(a.stdout, "FIELD", "VALUE")
	t.row("id", d.ID)
	t.row("endpoint", d.Endpoint)
	t.row("state", string(d.State))
	t.row("reason", d.DeadLetterReason)
	t.row("request", d.Method+" "+d.Path)
	t.row("idempotency key", d.IdempotencyKey)
	t.row("source record", d.SourceRecord)
	t.row("issuer", d.Issuer)
	t.row("created", ts(d.CreatedAt))
	t.row("finished", tsp(d.FinishedAt))
	t.row("next attempt", tsp(d.NextAttemptAt))
	t.row("replay of", d.ReplayOf)
	t.row("replayed by", d.ReplayedBy)
	t.row("last error", d.LastError)
	if r := d.Response; r != nil {
		cut := ""
		if r.BodyTruncated {
			cut = " (truncated)"
		}
		t.row("last response", fmt.Sprintf("%d, %d bytes%s", r.Status, len(r.Body), cut))
	}
	t.row("request body", fmt.Sprintf("%d bytes", d.Request.BodyBytes))
	if err := t.flush(); err != nil {
		return err
	}
	a.printf("\n")
	at := newTable(a.stdout, "N", "KIND", "STARTED", "DURATION", "STATUS", "OUTCOME", "ERROR")
	for _, x := range d.Attempts {
		at.row(strconv.Itoa(x.N), x.Kind, ts(x.StartedAt), strconv.FormatInt(x.DurationMs, 10)+"ms",
			status(x.Status), string(x.Outcome), x.Error)
	}
	return at.flush()
}

// discardDeadLetters is `dead-letters discard ID...`.
func (a *app) discardDeadLetters(ctx context.Context, c *cli.Command) error {
	ids := c.Args().Slice()
	if len(ids) == 0 {
		return usagef("dead-letters discard: at least one ID is required")
	}
	cl, _, err := a.setup(c)
	if err != nil {
		return err
	}
	if len(ids) > 1 && !c.Bool("yes") {
		if err := a.confirm(fmt.Sprintf("Discard %d dead letters? This deletes the proxy's copies.", len(ids))); err != nil {
			return err
		}
	}
	var failed []error
	for _, id := range ids {
		if _, _, err := cl.call(ctx, "DELETE", "dead-letters/"+url.PathEscape(id), nil, nil, nil); err != nil {
			a.notef("%s: %v\n", id, err)
			failed = append(failed, err)
			continue
		}
		a.printf("discarded %s\n", id)
	}
	return bulkResult(len(ids), failed)
}

// bulkResult is the error of a loop over n items of which failed failed:
// nil when none did, the error itself when all did (one item), a partial
// result (exit 5) when some did.
func bulkResult(n int, failed []error) error {
	switch {
	case len(failed) == 0:
		return nil
	case len(failed) == n && n == 1:
		return failed[0]
	case len(failed) == n:
		return withCode(exitCode(failed[0]), fmt.Errorf("all %d failed; first: %w", n, failed[0]))
	}
	msgs := make([]string, len(failed))
	for i, e := range failed {
		msgs[i] = e.Error()
	}
	return withCode(exitPartial, errors.New(strconv.Itoa(len(failed))+" of "+strconv.Itoa(n)+
		" failed: "+strings.Join(msgs, "; ")))
}
