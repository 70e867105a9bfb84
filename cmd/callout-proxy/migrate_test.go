package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/layout"
)

// migrateConfig is devConfig on the Redis at addr.
func migrateConfig(t *testing.T, addr string) string {
	return writeConfig(t, strings.Replace(devConfig(proctest.Endpoint("pay-api", "https://api.example.com")), "auth:",
		"redis:\n  url: redis://"+addr+"/0\nauth:", 1))
}

// `callout-proxy migrate` stamps an empty store, leaves a current one as it
// is, brings a layout-1 one forward and refuses a newer one; the proxy refuses to start on a store of
// another layout, naming both versions.
func TestMigrateAndStartUpLayoutCheck(t *testing.T) {
	m := miniredis.RunT(t)
	path := migrateConfig(t, m.Addr())
	getenv := func(k string) string { return testEnv()[k] }
	migrate := func() (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), []string{"migrate", "--config", path}, getenv, &out, &bytes.Buffer{})
		return out.String(), err
	}
	if out, err := migrate(); err != nil || !strings.Contains(out, "stamped layout 2") {
		t.Fatalf("migrate of an empty store: %q, %v", out, err)
	}
	if v, _ := m.Get("cp:layout"); v != "2" {
		t.Fatalf("cp:layout = %q after migrate, want 2", v)
	}
	if out, err := migrate(); err != nil || !strings.Contains(out, "already at layout 2") {
		t.Fatalf("migrate again: %q, %v", out, err)
	}
	start := func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var logs bytes.Buffer
		err := run(ctx, []string{"--config", path}, getenv, &bytes.Buffer{}, &logs)
		return logs.String(), err
	}
	var le *layout.Error
	// a store of the last release's layout (1): refused at start, brought
	// forward by migrate (its steps: proxy/redisstore TestMigrateOrganisationQueues)
	if err := m.Set("cp:layout", "1"); err != nil {
		t.Fatal(err)
	}
	if logs, err := start(); !errors.As(err, &le) || !strings.Contains(err.Error(), "version 1, this binary's is 2") ||
		strings.Contains(logs, `"msg":"listening"`) {
		t.Fatalf("start on a store of layout 1: %v, want a refusal naming 1 and 2\nlogs:\n%s", err, logs)
	}
	if out, err := migrate(); err != nil || !strings.Contains(out, "migrated layout 1 to 2") {
		t.Fatalf("migrate of a layout-1 store: %q, %v", out, err)
	}

	if err := m.Set("cp:layout", "3"); err != nil {
		t.Fatal(err)
	}
	if _, err := migrate(); !errors.As(err, &le) || exitCode(err) != 1 {
		t.Fatalf("migrate of a newer store: %v, want a LayoutError (exit 1)", err)
	}
	logs, err := start()
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "version 3") || !strings.Contains(err.Error(), "binary's 2") {
		t.Fatalf("start on a store of layout 3: %v, want a refusal naming 3 and 2\nlogs:\n%s", err, logs)
	}
	if strings.Contains(logs, `"msg":"listening"`) {
		t.Fatal("the proxy listened on a store of another layout")
	}
}

// A migration job needs the store's secrets only (config.LoadForStore): with
// none of the proxy's runtime secrets set (auth keys, admin tokens) migrate
// still runs; a missing redis.password_env is refused, naming that key, and
// the proxy itself still refuses the same environment.
func TestMigrateNeedsOnlyTheStoreSecrets(t *testing.T) {
	m := miniredis.RunT(t)
	m.RequireAuth("store-pass")
	path := writeConfig(t, strings.Replace(devConfig(proctest.Endpoint("pay-api", "https://api.example.com")), "auth:",
		"redis:\n  url: redis://"+m.Addr()+"/0\n  password_env: TEST_REDIS_PASSWORD\nauth:", 1))
	runWith := func(env map[string]string, args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errb)
		return out.String() + errb.String(), err
	}
	out, err := runWith(map[string]string{"TEST_REDIS_PASSWORD": "store-pass"}, "migrate", "--config", path)
	if err != nil || !strings.Contains(out, "stamped layout 2") {
		t.Fatalf("migrate with only the store's secret: %q, %v", out, err)
	}
	if _, err := runWith(map[string]string{}, "migrate", "--config", path); err == nil || exitCode(err) != 2 ||
		!strings.Contains(err.Error(), "redis.password_env") || strings.Contains(err.Error(), "auth.") {
		t.Fatalf("migrate without the store's secret: %v, want exit 2 naming redis.password_env only", err)
	}
	if _, err := runWith(map[string]string{"TEST_REDIS_PASSWORD": "store-pass"}, "validate", "--config", path); err == nil ||
		!strings.Contains(err.Error(), "TEST_JWT_SECRET") {
		t.Fatalf("validate without the runtime secrets: %v, want the missing auth secret named", err)
	}
}
