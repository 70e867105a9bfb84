package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
)

// filterFlags are the dead-letter filters of contract §8, shared by
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

// setupFilter is setup(c), then the filter of c's filter flags and its
// --unresolved flag: the start of `dead-letters list` and `replay`.
func (a *app) setupFilter(c *cli.Command) (*client, bool, api.ReplayFilter, error) {
	cl, asJSON, err := a.setup(c)
	if err != nil {
		return nil, false, api.ReplayFilter{}, err
	}
	f, err := a.filterOf(c)
	f.Unresolved = c.Bool("unresolved")
	return cl, asJSON, f, err
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
		len(f.Reasons) == 0 && !f.Unresolved
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
	if f.Unresolved {
		q.Set("unresolved", "true")
	}
	return q
}

func (a *app) deadLettersCommand() *cli.Command {
	return &cli.Command{
		Name:    "dead-letters",
		Aliases: []string{"deadletters"},
		Usage:   "list, get and discard dead letters",
		Commands: []*cli.Command{
			{
				Name: "list",
				Usage: "list dead letters, by endpoint then oldest first, with what became of their replays " +
					"(REPLAY: pending, succeeded, failed again); times in UTC",
				Flags: append(append(filterFlags(), watchFlags()...),
					&cli.BoolFlag{Name: "unresolved", Usage: "only those whose replays have not succeeded " +
						"(never replayed, pending, failed again)"},
					&cli.IntFlag{Name: "limit", Value: 50, Usage: "dead letters per page (1–1000)"},
					&cli.StringFlag{Name: "cursor", Usage: "the next page's cursor, as printed after a page"},
					&cli.BoolFlag{Name: "all", Usage: "follow every page"}),
				Action: a.watchable(a.listDeadLetters),
			},
			{Name: "get", Usage: "show one dead letter: request, attempts, last response and its body (redacted)",
				ArgsUsage: "ID", Action: a.getCallout("dead-letters")},
			{
				Name: "discard", Usage: "delete dead letters from the proxy's store (asks first on a terminal)",
				ArgsUsage: "ID...",
				Flags:     []cli.Flag{yesFlag()},
				Action:    a.discardDeadLetters,
			},
		},
	}
}

// listDeadLetters is `dead-letters list`.
func (a *app) listDeadLetters(ctx context.Context, c *cli.Command) error {
	cl, asJSON, f, err := a.setupFilter(c)
	if err != nil {
		return err
	}
	q := filterQuery(f)
	q.Set("limit", strconv.Itoa(c.Int("limit")))
	var all api.DeadLetterList
	if all.NextCursor, err = pages(ctx, cl, "dead-letters", q, c.String("cursor"), c.Bool("all"), &all.Items); err != nil {
		return err
	}
	if all.Items == nil {
		all.Items = []api.DeadLetterSummaryDoc{}
	}
	if asJSON {
		return writeJSON(a.stdout, nil, all)
	}
	if len(all.Items) == 0 && all.NextCursor == "" {
		a.notef("no dead letters match\n")
		return nil
	}
	wide := wideOutput(c)
	t := newTable(a.stdout, wide, col("ID", 0), col("ENDPOINT", 14), col("DEAD-LETTERED", 0), col("REASON", 0),
		col("STATUS", 0), col("REPLAY", 0), wideCol("REQUEST"), wideCol("ATTEMPTS"), wideCol("IDEMPOTENCY-KEY"),
		wideCol("REPLAY-OF"), wideCol("REPLAYED-BY"), wideCol("LAST-ERROR"))
	for _, d := range all.Items {
		t.row(d.ID, d.Endpoint, a.when(wide, d.DeadLetteredAt), string(d.Reason), status(d.Status),
			resolution(d.ReplayOutcome), d.Method+" "+d.Path, strconv.Itoa(d.Attempts), d.IdempotencyKey,
			d.ReplayOf, d.ReplayedBy, d.LastError)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if all.NextCursor != "" {
		a.notef("more dead letters: --cursor %s (or --all)\n", all.NextCursor)
	}
	return nil
}

// resolution is a REPLAY cell: what became of the dead letter's replays.
func resolution(r policy.Resolution) string {
	switch r {
	case policy.ResolutionFailedAgain:
		return "failed again"
	case "":
		return ""
	}
	return string(r)
}

// getCallout is `dead-letters get ID` (route "dead-letters") and
// `callouts get ID` (route "callouts").
func (a *app) getCallout(route string) cli.ActionFunc {
	return func(ctx context.Context, c *cli.Command) error {
		id, cl, asJSON, err := a.setupArg(c, "ID")
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
		return a.printCallout(d, wideOutput(c))
	}
}

// bodyPreview is how much of a response body `get` prints in -o table.
const bodyPreview = 1024

// printCallout writes a callout document as fields, then its attempts,
// then the last response's body: cut to bodyPreview bytes in -o table,
// whole in -o wide, with its size either way.
func (a *app) printCallout(d api.CalloutDoc, wide bool) error {
	t := newTable(a.stdout, wide, col("FIELD", 0), col("VALUE", 80))
	t.row("id", d.ID)
	t.row("endpoint", d.Endpoint)
	t.row("state", string(d.State))
	if h := d.HeldBy; h != nil { // contract §12 held_by: "breaker_open, organisation, until T"
		held := string(h.Gate) + ", " + h.Level
		if h.Until != nil {
			held += ", until " + a.stamp(*h.Until)
		}
		t.row("held by", held)
	}
	t.row("dead letter reason", d.DeadLetterReason)
	// last_outcome, the last attempt's class, reads "last attempt" on
	// every surface (contract §12), as in the console.
	t.row("last attempt", string(d.LastOutcome))
	t.row("request", d.Method+" "+d.Path)
	t.row("idempotency key", d.IdempotencyKey)
	t.row("source record", d.SourceRecord)
	t.row("issuer", d.Issuer)
	t.row("created", a.stamp(d.CreatedAt))
	t.row("finished", a.stampp(d.FinishedAt))
	t.row("next attempt", a.stampp(d.NextAttemptAt))
	t.row("replay of", d.ReplayOf)
	t.row("replayed by", d.ReplayedBy)
	t.row("replay outcome", resolution(d.ReplayOutcome))
	t.row("last error", d.LastError)
	if r := d.Response; r != nil {
		t.row("last response", fmt.Sprintf("%d, body %s", r.Status, bodySize(r)))
	}
	t.row("request body", requestBody(d))
	if err := t.flush(); err != nil {
		return err
	}
	a.printf("\n")
	at := newTable(a.stdout, wide, col("N", 0), col("KIND", 0), col("STARTED", 0), col("DURATION", 0),
		col("STATUS", 0), col("OUTCOME", 0), col("ERROR", 30))
	for _, x := range d.Attempts {
		at.row(strconv.Itoa(x.N), x.Kind, ts(x.StartedAt), (time.Duration(x.DurationMs) * time.Millisecond).String(),
			status(x.Status), string(x.Outcome), x.Error)
	}
	if err := at.flush(); err != nil {
		return err
	}
	if r := d.Response; r != nil && r.Body != "" {
		body := r.Body
		note := ""
		if !wide && len(body) > bodyPreview {
			body = strings.ToValidUTF8(body[:bodyPreview], "")
			note = fmt.Sprintf("… (%d of %d bytes shown; -o wide or -o json shows it all)", len(body), len(r.Body))
		}
		a.printf("\nlast response body (%s):\n%s\n", bodySize(r), body)
		if note != "" {
			a.printf("%s\n", note)
		}
	}
	return nil
}

// requestBody says what the record holds of the request's body: its size,
// or that it was not kept — a succeeded or failed callout keeps what an
// idempotent replay needs, not the request (contract §5); a dead letter
// and a pending callout keep it whole.
func requestBody(d api.CalloutDoc) string {
	if d.State.Finished() && d.State != policy.DeadLettered {
		return "(not kept once " + string(d.State) + ": contract §5)"
	}
	return fmt.Sprintf("%d bytes", d.Request.BodyBytes)
}

// bodySize says how big a stored response body is: "57 bytes", "1024
// bytes, base64", "16384 bytes kept (the proxy cut the rest)".
func bodySize(r *api.ResponseDoc) string {
	n := len(r.Body)
	if r.BodyEncoding == "base64" {
		if b, err := base64.StdEncoding.DecodeString(r.Body); err == nil {
			n = len(b)
		}
	}
	s := fmt.Sprintf("%d bytes", n)
	if r.BodyEncoding != "" {
		s += ", " + r.BodyEncoding
	}
	if r.BodyTruncated {
		s += " kept (the proxy cut the rest)"
	}
	return s
}

// discardDeadLetters is `dead-letters discard ID...`. It asks first when
// several are given, or when stdin is a terminal (a person typing one id
// gets the question too), unless --yes.
func (a *app) discardDeadLetters(ctx context.Context, c *cli.Command) error {
	ids := c.Args().Slice()
	if len(ids) == 0 {
		return usagef("dead-letters discard: at least one ID is required")
	}
	cl, _, err := a.setup(c)
	if err != nil {
		return err
	}
	if !c.Bool("yes") && (len(ids) > 1 || a.isTerminal(a.stdin)) {
		q := fmt.Sprintf("Discard %d dead letters? This deletes the proxy's copies.", len(ids))
		if len(ids) == 1 {
			q = fmt.Sprintf("Discard dead letter %s? This deletes the proxy's copy.", ids[0])
		}
		if err := a.confirm(ctx, q); err != nil {
			return err
		}
	}
	var failed []error
	for _, id := range ids {
		if _, _, err := cl.call(ctx, "DELETE", "dead-letters/"+url.PathEscape(id), nil, nil, nil); err != nil {
			if ctx.Err() != nil {
				return err
			}
			failed = append(failed, fmt.Errorf("%s: %w", id, err))
			continue
		}
		a.printf("discarded %s\n", id)
	}
	return a.bulkResult(len(ids), failed)
}

// bulkResult is the error of a loop over n items of which failed failed,
// each said once: nil when none did; the one error itself for one item;
// otherwise each failure is printed here and the error only counts them,
// with the first one's exit code when all failed, exit 5 when some did.
func (a *app) bulkResult(n int, failed []error) error {
	switch {
	case len(failed) == 0:
		return nil
	case n == 1:
		return failed[0]
	}
	for _, e := range failed {
		a.notef("%v\n", e)
	}
	if len(failed) == n {
		return withCode(exitCode(failed[0]), fmt.Errorf("all %d failed (above)", n))
	}
	return withCode(exitPartial, fmt.Errorf("%d of %d failed (above)", len(failed), n))
}
