package config_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

func TestValidateLog(t *testing.T) {
	runInvalid(t, []invalidCase{
		{"unknown level", map[string]string{"extra": "log:\n  level: verbose\n"},
			[]string{`log.level: "verbose" is not debug, info, warn or error`}},
		{"unknown format", map[string]string{"extra": "log:\n  format: logfmt\n"},
			[]string{`log.format: "logfmt" is not json or text`}},
		{"negative interval", map[string]string{"extra": "log:\n  collapse_interval: -1s\n"},
			[]string{"log.collapse_interval: must not be negative"}},
	})
}

// TestLogDefaults: no log section is info, json, collapsing each minute;
// given keys replace them one by one.
func TestLogDefaults(t *testing.T) {
	dir := keyFiles(t)
	cfg, err := config.Parse([]byte(doc(nil, dir)), baseEnv().get)
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Log; l.Level != "info" || l.Format != "json" || l.CollapseInterval != time.Minute || l.SlogLevel() != slog.LevelInfo {
		t.Fatalf("defaults = %+v", l)
	}
	cfg, err = config.Parse([]byte(doc(map[string]string{"extra": "log:\n  level: debug\n  format: text\n"}, dir)), baseEnv().get)
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Log; l.Format != "text" || l.SlogLevel() != slog.LevelDebug || l.CollapseInterval != time.Minute {
		t.Fatalf("given = %+v", l)
	}
}
