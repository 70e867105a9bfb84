package config_test

import (
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

func TestLogAccess(t *testing.T) {
	if got := mustParse(t, doc(nil, ""), baseEnv().get).Log.Access; got != config.LogAccessErrors {
		t.Errorf("log.access by default = %q, want errors", got)
	}
	for _, v := range []string{config.LogAccessAll, config.LogAccessErrors, config.LogAccessNone} {
		cfg := mustParse(t, doc(map[string]string{"extra": "log:\n  access: " + v + "\n"}, ""), baseEnv().get)
		if cfg.Log.Access != v {
			t.Errorf("log.access %s parsed as %q", v, cfg.Log.Access)
		}
	}
	runInvalid(t, []invalidCase{
		{"unknown value", map[string]string{"extra": "log:\n  access: debug\n"},
			[]string{`log.access: "debug" is not one of all, errors, none`}},
		{"unknown key", map[string]string{"extra": "log:\n  acess: all\n"},
			[]string{`log.acess: unknown key`}},
	})
}
