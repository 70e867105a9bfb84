package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// runValidate is `callout-proxy validate --config FILE`: it checks the
// configuration as serve would before listening — every key (config.Load:
// the problems listed by key and line), the files and environment
// variables it names, the caller and admin token secrets — without
// connecting to Redis or Salesforce or opening a port. It prints a summary
// and returns nil when the configuration would start; a configuration
// error otherwise (exit 2).
func runValidate(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	path, cfg, err := loadConfigFlag("validate", args, config.Load, getenv, stderr)
	if cfg == nil {
		return err
	}
	if _, err := auth.NewVerifier(cfg.Auth, getenv, time.Now); err != nil {
		return usageError{fmt.Errorf("auth: %w", err)}
	}
	if _, err := auth.NewAdminTokens(cfg.Admin, getenv); err != nil {
		return usageError{fmt.Errorf("admin: %w", err)}
	}
	sf := "off (dead letters stay in the proxy's store)"
	if cfg.Salesforce != nil {
		sf = "on (" + cfg.Salesforce.LoginURL + ")"
	}
	fmt.Fprintf(stdout, "%s: configuration OK\n  listen %s, admin_listen %s\n  redis: %s\n  endpoints (%d): %s\n"+
		"  salesforce: %s\n  log: %s, %s\n", path, cfg.Listen, cfg.AdminListen, cfg.Redis,
		len(cfg.Endpoints), strings.Join(cfg.EndpointNames(), ", "), sf, cfg.Log.Level, cfg.Log.Format)
	return nil
}
