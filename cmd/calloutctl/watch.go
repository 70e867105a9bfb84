package main

import (
	"context"
	"time"

	"github.com/urfave/cli/v3"
)

// defaultWatchInterval is --interval's default: how often --watch redraws.
const defaultWatchInterval = 2 * time.Second

// minWatchInterval is the shortest --interval: each redraw is one or a few
// admin API requests.
const minWatchInterval = 500 * time.Millisecond

// watchFlags are the flags of a list that can be watched.
func watchFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "watch", Aliases: []string{"w"},
			Usage: "redraw the list every --interval until Ctrl-C (on a terminal the screen is cleared)"},
		&cli.DurationFlag{Name: "interval", Value: defaultWatchInterval,
			Usage: "how often --watch redraws (at least 500ms)"},
	}
}

// ticker starts a ticker of period d: its channel and its stop. Tests
// replace app.ticker with channels they drive.
func ticker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// clearScreen moves a terminal's cursor home and clears the screen (ANSI
// CSI H, CSI 2J), as watch(1) redraws.
const clearScreen = "\x1b[H\x1b[2J"

// watchable is list with --watch: without it list runs once; with it list
// runs, then again on every tick of a.ticker(--interval), each frame under
// a header line with the time (on a terminal the screen is cleared first,
// otherwise frames follow each other after a blank line), until ctx ends
// (Ctrl-C), which ends the watch with exit 0. A frame's error that is a
// usage error or a refusal (bad token, exit 2 or 4) ends the watch; any
// other (the proxy unreachable for a moment) is printed and the next tick
// tries again.
func (a *app) watchable(list cli.ActionFunc) cli.ActionFunc {
	return func(ctx context.Context, c *cli.Command) error {
		if !c.Bool("watch") {
			return list(ctx, c)
		}
		every := c.Duration("interval")
		if every < minWatchInterval {
			return usagef("--interval %s: at least %s", every, minWatchInterval)
		}
		if o, err := outputMode(c); err != nil {
			return err
		} else if o == "json" {
			return usagef("--watch draws tables: use -o table or -o wide (-o json prints one document)")
		}
		tick, stop := a.ticker(every)
		defer stop()
		terminal := a.isTerminal(a.stdout)
		for frame := 0; ; frame++ {
			switch {
			case terminal:
				a.printf("%s", clearScreen)
			case frame > 0:
				a.printf("\n")
			}
			a.printf("Every %s: %s · %s\n\n", every, c.FullName(), a.now().UTC().Format(time.DateTime+" UTC"))
			if err := list(ctx, c); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if code := exitCode(err); code == exitUsage || code == exitRefused {
					return err
				}
				a.notef("calloutctl: %v (trying again in %s)\n", err, every)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-tick:
			}
		}
	}
}
