package admin

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/replay"
)

// filterOf reads a replay.Filter from the list query parameters endpoint,
// reason, status, since, until and unresolved. Errors: InvalidRequest (a status that
// is not a number, a time that is not RFC 3339); the service validates
// the rest.
func filterOf(q url.Values) (replay.Filter, error) {
	var f replay.Filter
	f.Endpoints = listParam(q, "endpoint")
	for _, r := range listParam(q, "reason") {
		f.Reasons = append(f.Reasons, policy.DeadLetterReason(r))
	}
	for _, v := range listParam(q, "status") {
		n, err := strconv.Atoi(v)
		if err != nil {
			return f, problem.Errorf(problem.InvalidRequest, "status "+strconv.Quote(v)+" is not a number")
		}
		f.Statuses = append(f.Statuses, n)
	}
	var err error
	if f.Since, err = timeParam(q, "since"); err != nil {
		return f, err
	}
	if f.Until, err = timeParam(q, "until"); err != nil {
		return f, err
	}
	switch v := q.Get("unresolved"); v {
	case "", "false":
	case "true":
		f.Unresolved = true
	default:
		return f, problem.Errorf(problem.InvalidRequest, "unresolved must be true or false")
	}
	return f, nil
}

// listParam returns every value of key, comma-separated values split.
func listParam(q url.Values, key string) []string {
	var out []string
	for _, v := range q[key] {
		for part := range strings.SplitSeq(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

// timeParam parses an RFC 3339 query parameter; absent is the zero time.
func timeParam(q url.Values, key string) (time.Time, error) {
	v := q.Get(key)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return t, problem.Errorf(problem.InvalidRequest, key+" must be an RFC 3339 time, e.g. 2025-01-31T14:00:00Z")
	}
	return t, nil
}

// intParam parses a non-negative integer query parameter; absent is def.
func intParam(q url.Values, key string, def int) (int, error) {
	v := q.Get(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, problem.Errorf(problem.InvalidRequest, key+" must be a non-negative integer")
	}
	return n, nil
}
