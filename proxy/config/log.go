package config

import (
	"log/slog"
	"time"
)

// Log configures the proxy's own log (stderr): which attempts get a line,
// the least level written, the format, and how repeated identical warnings
// and errors are collapsed. Each key is its own field.
type Log struct {
	// Access says which upstream attempts get an "attempt" log line — the
	// callout listener's and the dispatcher's alike, with the same fields
	// (forward.LogAttempt): LogAccessAll (the default, so that a caller's
	// trace_id finds its callout whether it succeeded or not; why:
	// docs/operating.md "Logs"), LogAccessErrors (attempts whose outcome is
	// not success, contract §2) or LogAccessNone.
	// Rejections before dispatch are logged apart, sampled (one line per
	// endpoint and problem code a minute), whatever this says.
	Access string `yaml:"access"`
	// Level is the least level written: debug, info, warn or error.
	// Default info.
	Level string `yaml:"level"`
	// Format is json (one JSON object per line, the default: what log
	// pipelines parse) or text (slog's key=value lines, for a terminal).
	Format string `yaml:"format"`
	// CollapseInterval: a warning or error identical to one written less
	// than this long ago (same message and attributes, e.g. "claim failed"
	// while Redis is down) is counted instead of written, and one line per
	// interval says how many were (attribute "repeated"). Default 1m; 0
	// writes every line.
	CollapseInterval time.Duration `yaml:"collapse_interval"`
}

// Values of Log.Access.
const (
	// LogAccessAll logs every attempt.
	LogAccessAll = "all"
	// LogAccessErrors logs the attempts whose outcome is retryable or
	// permanent; successes are counted in callout_attempts_total only.
	LogAccessErrors = "errors"
	// LogAccessNone logs no attempt; the metrics still count them.
	LogAccessNone = "none"
)

// DefaultCollapseInterval is Log.CollapseInterval's default.
const DefaultCollapseInterval = time.Minute

// applyDefaults fills an empty Access with LogAccessAll, an empty Level
// with info and an empty Format with json.
func (l *Log) applyDefaults() {
	if l.Access == "" {
		l.Access = LogAccessAll
	}
	if l.Level == "" {
		l.Level = "info"
	}
	if l.Format == "" {
		l.Format = "json"
	}
}

// SlogLevel is Level as a slog.Level (info when Level is empty or not a
// level; validate refuses those).
func (l Log) SlogLevel() slog.Level {
	switch l.Level {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// validate checks the log keys.
func (l Log) validate(col *collector) {
	switch l.Access {
	case LogAccessAll, LogAccessErrors, LogAccessNone:
	default:
		col.add("log.access", "%q is not one of all, errors, none", l.Access)
	}
	switch l.Level {
	case "debug", "info", "warn", "error":
	default:
		col.add("log.level", "%q is not debug, info, warn or error", l.Level)
	}
	switch l.Format {
	case "json", "text":
	default:
		col.add("log.format", "%q is not json or text", l.Format)
	}
	if l.CollapseInterval < 0 {
		col.add("log.collapse_interval", "must not be negative (0 writes every line)")
	}
}
