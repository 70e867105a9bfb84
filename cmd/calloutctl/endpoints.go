package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
)

func (a *app) endpointsCommand() *cli.Command {
	return &cli.Command{
		Name:  "endpoints",
		Usage: "list endpoints; enable, disable or reset one",
		Commands: []*cli.Command{
			{Name: "list", Usage: "every configured endpoint: its gate (what a request meets: open passes; half_open " +
				"lets one probe through; breaker_open, probing and paused hold writes; disabled refuses), consecutive " +
				"failures, backlog, dead letters; -o wide adds the breaker (closed, open, half_open)",
				Flags: watchFlags(), Action: a.watchable(a.listEndpoints)},
			{Name: "enable", Usage: "re-enable a disabled endpoint (its dead letters can then be replayed)",
				ArgsUsage: "NAME", Flags: []cli.Flag{yesFlag()}, Action: a.endpointAction("enable", "enable")},
			{Name: "disable", Usage: "disable an endpoint: its pending callouts become dead letters",
				ArgsUsage: "NAME", Flags: []cli.Flag{
					&cli.StringFlag{Name: "reason", Usage: "why, kept with the disable"}, yesFlag(),
				}, Action: a.endpointAction("disable", "disable")},
			{Name: "reset", Usage: "close an endpoint's circuit breaker and lift its pause",
				ArgsUsage: "NAME", Flags: []cli.Flag{yesFlag()}, Action: a.endpointAction("reset", "breaker/reset")},
		},
	}
}

// listEndpoints is `endpoints list`.
func (a *app) listEndpoints(ctx context.Context, c *cli.Command) error {
	cl, asJSON, err := a.setup(c)
	if err != nil {
		return err
	}
	var l api.EndpointList
	raw, _, err := cl.call(ctx, "GET", "endpoints", nil, nil, &l)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(a.stdout, raw, nil)
	}
	wide := wideOutput(c)
	// GATE is what a request meets, in the words of contract §12 (open:
	// passing); BREAKER, the breaker's own state, only in -o wide, so that
	// no breaker word sits where the gate is read.
	t := newTable(a.stdout, wide, col("NAME", 14), col("GATE", 0), wideCol("BREAKER"), col("FAILS", 0),
		col("BACKLOG", 0), col("IN-FLIGHT", 0), col("DEAD-LETTERS", 0), col("NEXT-PROBE", 0),
		wideCol("OPENED-AT"), wideCol("PAUSED-UNTIL"), wideCol("DISABLED-REASON"), wideCol("OPEN-PARTITIONS"))
	for _, e := range l.Endpoints {
		t.row(e.Name, string(e.Gate), string(e.Breaker), strconv.Itoa(e.ConsecutiveFailures),
			strconv.FormatInt(e.BacklogItems, 10), strconv.FormatInt(e.InFlight, 10),
			strconv.FormatInt(e.DeadLetters, 10), a.whenp(wide, e.NextProbeAt), a.whenp(wide, e.OpenedAt),
			a.whenp(wide, e.PausedUntil), e.DisabledReason, openPartitions(e.Partitions))
	}
	return t.flush()
}

// openPartitions lists the issuers whose breaker partition is not closed
// (contract §6), comma-separated.
func openPartitions(ps []api.PartitionDoc) string {
	var out []string
	for _, p := range ps {
		if p.Breaker != policy.BreakerClosed {
			out = append(out, p.Issuer)
		}
	}
	return strings.Join(out, ",")
}

// endpointAction is `endpoints enable|disable|reset NAME`, POSTing to
// endpoints/NAME/route. Disabling asks first (unless --yes): it turns the
// endpoint's whole backlog into dead letters.
func (a *app) endpointAction(verb, route string) cli.ActionFunc {
	return func(ctx context.Context, c *cli.Command) error {
		name, cl, asJSON, err := a.setupArg(c, "endpoint NAME")
		if err != nil {
			return err
		}
		path := "endpoints/" + url.PathEscape(name)
		if verb == "disable" && !c.Bool("yes") {
			var e api.EndpointDoc
			if _, _, err := cl.call(ctx, "GET", path, nil, nil, &e); err != nil {
				return err
			}
			q := fmt.Sprintf("Disable %s? Its %d pending callouts become dead letters.", name, e.BacklogItems)
			if err := a.confirm(ctx, q); err != nil {
				return err
			}
		}
		var body any
		if r := c.String("reason"); verb == "disable" && r != "" {
			body = map[string]string{"reason": r}
		}
		var res api.EndpointActionResult
		raw, _, err := cl.call(ctx, "POST", path+"/"+route, nil, body, &res)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(a.stdout, raw, nil)
		}
		done := map[string]string{"enable": "enabled", "disable": "disabled", "reset": "breaker reset"}[verb]
		if !res.Changed {
			done = map[string]string{"enable": "was already enabled", "disable": "was already disabled",
				"reset": "had nothing to reset"}[verb]
		}
		a.printf("endpoint %s %s", name, done)
		if n := len(res.DeadLettered); n > 0 {
			a.printf("; %d pending callouts became dead letters", n)
		}
		a.printf("\n")
		return nil
	}
}
