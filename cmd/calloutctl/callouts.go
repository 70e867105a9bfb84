package main

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
)

func (a *app) calloutsCommand() *cli.Command {
	return &cli.Command{
		Name:  "callouts",
		Usage: "list pending callouts; show any callout of any organisation",
		Commands: []*cli.Command{
			{Name: "list", Usage: "list pending callouts (scheduled, held, in flight), soonest due first, of one " +
				"endpoint or, without --endpoint, of every endpoint with a backlog",
				Flags: append([]cli.Flag{
					&cli.StringFlag{Name: "endpoint", Usage: "the endpoint; default every endpoint with a backlog"},
					&cli.StringFlag{Name: "state", Usage: "scheduled, held (behind an open breaker or a pause) or " +
						"in_flight; default all three"},
					&cli.IntFlag{Name: "limit", Value: 50, Usage: "callouts per page, per endpoint and state (1–1000)"},
					&cli.StringFlag{Name: "cursor", Usage: "the next page's cursor, as printed after a page " +
						"(with its --endpoint and --state)"},
					&cli.BoolFlag{Name: "all", Usage: "follow every page"},
				}, watchFlags()...),
				Action: a.watchable(a.listCallouts)},
			{Name: "get", Usage: "show one callout: state, request, attempts, last response and its body (redacted)",
				ArgsUsage: "ID", Action: a.getCallout("callouts")},
		},
	}
}

// listCallouts is `callouts list [--endpoint E] [--state S]`: for each
// endpoint (the one given, or every endpoint whose backlog is not empty,
// by name), without --state the scheduled, then the held, then the
// in-flight ones; each (endpoint, state) list one page unless --all.
func (a *app) listCallouts(ctx context.Context, c *cli.Command) error {
	cl, asJSON, err := a.setup(c)
	if err != nil {
		return err
	}
	states := []policy.State{policy.Scheduled, policy.Held, policy.InFlight}
	switch s := policy.State(c.String("state")); s {
	case "":
		if c.String("cursor") != "" {
			return usagef("--cursor needs the --state it was printed for")
		}
	case policy.Scheduled, policy.Held, policy.InFlight:
		states = []policy.State{s}
	default:
		return usagef("--state %q: use scheduled, held or in_flight", s)
	}
	endpoints := []string{c.String("endpoint")}
	if endpoints[0] == "" {
		if c.String("cursor") != "" {
			return usagef("--cursor needs the --endpoint it was printed for")
		}
		if endpoints, err = pendingEndpoints(ctx, cl); err != nil {
			return err
		}
	}
	var all api.CalloutList
	var more []string // "--endpoint E --state S --cursor C" of the lists cut short
	for _, ep := range endpoints {
		for _, st := range states {
			q := url.Values{"endpoint": {ep}, "state": {string(st)}, "limit": {strconv.Itoa(c.Int("limit"))}}
			cursor, err := pages(ctx, cl, "callouts", q, c.String("cursor"), c.Bool("all"), &all.Items)
			if err != nil {
				return err
			}
			if cursor != "" {
				more = append(more, "--endpoint "+ep+" --state "+string(st)+" --cursor "+cursor)
				all.NextCursor = cursor
			}
		}
	}
	if all.Items == nil {
		all.Items = []api.CalloutSummaryDoc{}
	}
	if asJSON {
		return writeJSON(a.stdout, nil, all)
	}
	if len(all.Items) == 0 && len(more) == 0 {
		a.notef("no pending callouts match\n")
		return nil
	}
	wide := wideOutput(c)
	t := newTable(a.stdout, wide, col("ID", 0), col("ENDPOINT", 14), col("STATE", 0), col("DUE/LEASE-UNTIL", 0),
		col("ATTEMPTS", 0), col("REQUEST", 22), wideCol("IDEMPOTENCY-KEY"), wideCol("CREATED"),
		wideCol("REPLAY-OF"), wideCol("ISSUER"), wideCol("LAST-ERROR"))
	for _, p := range all.Items {
		at := time.Time{}
		if p.NextAttemptAt != nil {
			at = *p.NextAttemptAt
		}
		t.row(p.ID, p.Endpoint, string(p.State), a.when(wide, at), strconv.Itoa(p.Attempts), p.Method+" "+p.Path,
			p.IdempotencyKey, ts(p.CreatedAt), p.ReplayOf, p.Issuer, p.LastError)
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, m := range more {
		a.notef("more callouts: %s (or --all)\n", m)
	}
	return nil
}

// pendingEndpoints is the names of the endpoints whose backlog (pending
// callouts, contract §10) is not empty, by name (GET /admin/v1/endpoints).
func pendingEndpoints(ctx context.Context, cl *client) ([]string, error) {
	var l api.EndpointList
	if _, _, err := cl.call(ctx, "GET", "endpoints", nil, nil, &l); err != nil {
		return nil, err
	}
	var names []string
	for _, e := range l.Endpoints {
		if e.BacklogItems > 0 {
			names = append(names, e.Name)
		}
	}
	return names, nil
}
