package config

// Log configures the proxy's logs. Other keys of the `log:` section may sit
// beside Access; each is its own field.
type Log struct {
	// Access says which callout attempts of the callout listener get an
	// "attempt" log line (endpoint, callout_id, kind, status, outcome,
	// reason, duration_ms): LogAccessAll, LogAccessErrors (the default:
	// attempts whose outcome is not success, SPEC §2) or LogAccessNone.
	// Rejections before dispatch are logged apart, sampled (one line per
	// endpoint and problem code a minute), whatever this says.
	Access string `yaml:"access"`
}

// Values of Log.Access.
const (
	// LogAccessAll logs every attempt of the callout listener.
	LogAccessAll = "all"
	// LogAccessErrors logs the attempts whose outcome is retryable or
	// permanent; successes are counted in callout_attempts_total only.
	LogAccessErrors = "errors"
	// LogAccessNone logs no attempt; the metrics still count them.
	LogAccessNone = "none"
)

// applyDefaults fills an empty Access with LogAccessErrors.
func (l *Log) applyDefaults() {
	if l.Access == "" {
		l.Access = LogAccessErrors
	}
}

// validate reports a Log.Access that is not one of its values.
func (l Log) validate(col *collector) {
	switch l.Access {
	case LogAccessAll, LogAccessErrors, LogAccessNone:
	default:
		col.add("log.access", "%q is not one of all, errors, none", l.Access)
	}
}
