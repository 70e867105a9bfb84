package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/layout"
)

// runMigrate is `callout-proxy migrate --config FILE`: it brings the
// configured Redis store to this binary's layout (redisstore.Migrate,
// keyspace cp:layout) and says what it found. A store of a newer or an
// unknown older layout is refused (exit 1), nothing written. The embedded
// store lives only inside a running proxy, which stamps it at start:
// nothing to migrate.
func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	_, cfg, err := loadConfigFlag("migrate", args, getenv, stderr)
	if cfg == nil {
		return err
	}
	if cfg.Redis.Embedded() {
		fmt.Fprintln(stdout, "redis: embedded (in memory): nothing to migrate; a proxy stamps its embedded store at start")
		return nil
	}
	rdb, closeRedis, err := openRedis(cfg.Redis, getenv, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer closeRedis()
	from, err := layout.Migrate(ctx, rdb)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	switch from {
	case 0:
		fmt.Fprintf(stdout, "redis %s: no layout yet; stamped layout %d\n", cfg.Redis, layout.Version)
	default:
		fmt.Fprintf(stdout, "redis %s: already at layout %d; nothing to do\n", cfg.Redis, from)
	}
	return nil
}

// layoutCheckTimeout bounds the start-up layout check; a Redis that does
// not answer in time is checked again in the background (contract §9:
// the proxy runs, and /readyz reports, while Redis is down).
const layoutCheckTimeout = 2 * time.Second

// checkLayout refuses a store whose layout is not this binary's
// (layout.Check; a store never used is stamped). When Redis does
// not answer, it warns and returns a function that keeps checking every
// few seconds until ctx ends, calling stop with the *LayoutError if the
// store, once reachable, has another layout; nil otherwise.
func checkLayout(ctx context.Context, store *redisstore.Store, logger *slog.Logger,
	stop context.CancelCauseFunc) (later func(context.Context), err error) {
	try := func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, layoutCheckTimeout)
		defer cancel()
		return store.CheckLayout(cctx)
	}
	err = try(ctx)
	if ctx.Err() != nil {
		return nil, nil // shutting down before it started
	}
	if err == nil || !unreachable(err) {
		return nil, err
	}
	logger.Warn("could not check the store's layout: Redis does not answer; checking again until it does",
		slog.Any("error", err))
	return func(bg context.Context) {
		t := time.NewTicker(layoutCheckTimeout)
		defer t.Stop()
		for {
			select {
			case <-bg.Done():
				return
			case <-t.C:
			}
			err := try(bg)
			if err != nil && unreachable(err) {
				continue
			}
			if err != nil {
				logger.Error("the store's layout is not this binary's; stopping", slog.Any("error", err))
				stop(err)
			}
			return
		}
	}, nil
}

// unreachable reports an error of a Redis that did not answer.
func unreachable(err error) bool {
	return errors.Is(err, policy.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// loadConfigFlag parses the one flag of a subcommand that reads the
// configuration (--config FILE, required) and loads it. It returns the
// path and the configuration, or a nil configuration with the error to
// return: nil for -h (the usage was printed), a usageError (exit 2) for a
// bad flag, a missing --config or a configuration error.
func loadConfigFlag(sub string, args []string, getenv func(string) string, stderr io.Writer) (string, *config.Config, error) {
	fs := flag.NewFlagSet("callout-proxy "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "path to the YAML configuration file (required)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return "", nil, nil
	} else if err != nil {
		return "", nil, usageError{err}
	}
	if *path == "" {
		return "", nil, usageError{errors.New(sub + ": --config FILE is required")}
	}
	cfg, err := config.Load(*path, getenv)
	if err != nil {
		return "", nil, usageError{err}
	}
	return *path, cfg, nil
}
