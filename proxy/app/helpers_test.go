package app

import (
	"context"
	"io"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// parseConfig parses the configuration doc with its secrets from env.
func parseConfig(t *testing.T, doc string, env map[string]string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(doc), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// runApp builds an App of cur over a fresh miniredis, whose Load answers
// next and whose secrets come from env, and runs it until the test ends.
func runApp(t *testing.T, cur, next *config.Config, env map[string]string) *App {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	a, err := New(t.Context(), Options{Config: cur, Load: func() (*config.Config, error) { return next, nil },
		Getenv: func(k string) string { return env[k] }, Logs: io.Discard, Redis: rdb, Owner: "replica-1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	return a
}
