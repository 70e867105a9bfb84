package auth

import (
	"strings"

	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// AuditResult is the result of an audit line (msg "audit": admin writes,
// console logins, replays, the login throttle's summaries) for a refusal
// with problem code c: the code in the contract's vocabulary, lower-case
// words joined by underscores (docs/contract.md §12), as every audit result
// is written — "ok", "replayed", "already_replayed", "not_found",
// "login_throttled", "unauthorized_repeated". The problem document keeps
// the code itself in its type (urn:callout-proxy:problem:not-found,
// contract §2); only log and metric values use the vocabulary's form.
func AuditResult(c problem.Code) string { return strings.ReplaceAll(string(c), "-", "_") }
