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
// is, and refuses a newer one; the proxy refuses to start on a store of
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
	if out, err := migrate(); err != nil || !strings.Contains(out, "stamped layout 1") {
		t.Fatalf("migrate of an empty store: %q, %v", out, err)
	}
	if v, _ := m.Get("cp:layout"); v != "1" {
		t.Fatalf("cp:layout = %q after migrate, want 1", v)
	}
	if out, err := migrate(); err != nil || !strings.Contains(out, "already at layout 1") {
		t.Fatalf("migrate again: %q, %v", out, err)
	}

	if err := m.Set("cp:layout", "2"); err != nil {
		t.Fatal(err)
	}
	_, err := migrate()
	var le *layout.Error
	if !errors.As(err, &le) || exitCode(err) != 1 {
		t.Fatalf("migrate of a newer store: %v, want a LayoutError (exit 1)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var logs bytes.Buffer
	err = run(ctx, []string{"--config", path}, getenv, &bytes.Buffer{}, &logs)
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "version 2") || !strings.Contains(err.Error(), "binary's 1") {
		t.Fatalf("start on a store of layout 2: %v, want a refusal naming 2 and 1\nlogs:\n%s", err, &logs)
	}
	if strings.Contains(logs.String(), `"msg":"listening"`) {
		t.Fatal("the proxy listened on a store of another layout")
	}
}
