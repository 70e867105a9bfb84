package app

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
)

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
	stop func(error)) (later func(context.Context), err error) {
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
			if bg.Err() != nil {
				return // shutting down: the check was cut short, it found nothing
			}
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
