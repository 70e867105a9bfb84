package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/app"
	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// serve loads the configuration at configPath and runs the proxy on it
// (app.New, app.App.Run) until ctx ends (SIGTERM). SIGHUP reloads the
// file (app.App.Reload). A configuration error is a usageError (exit 2).
func serve(ctx context.Context, configPath string, getenv func(string) string, stderr io.Writer) error {
	cfg, err := config.Load(configPath, getenv)
	if err != nil {
		return usageError{err}
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return runApp(ctx, app.Options{Config: cfg, Getenv: getenv, Logs: stderr, Reloads: hup,
		Load: func() (*config.Config, error) { return config.LoadPartial(configPath, getenv) }}, nil)
}

// runApp completes o with this binary's build and clocks (processClock,
// sharedClock: the faultclock build offsets them), wires the proxy and,
// once it listens, calls ready with it (nil: nothing), then serves until
// ctx ends. A ConfigError is a usageError (exit 2).
func runApp(ctx context.Context, o app.Options, ready func(*app.App) error) error {
	now, err := processClock(o.Getenv)
	if err != nil {
		return usageError{err}
	}
	o.Build, o.Now = buildInfo(), now
	o.SharedClock = func(corrected func() time.Time) func() time.Time { return sharedClock(o.Getenv, corrected, now) }
	a, err := app.New(ctx, o)
	if err != nil {
		return appError(err)
	}
	if ready != nil {
		if err := ready(a); err != nil {
			// Run was not called: it is what closes the App; run it on a
			// context already ended so it shuts down at once.
			done, cancel := context.WithCancel(ctx)
			cancel()
			_ = a.Run(done)
			return err
		}
	}
	return appError(a.Run(ctx))
}

// appError makes an app.ConfigError a usageError (exit 2).
func appError(err error) error {
	var ce app.ConfigError
	if errors.As(err, &ce) {
		return usageError{err}
	}
	return err
}
