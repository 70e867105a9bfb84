// Package api holds the JSON documents of the proxy's HTTP API (contract
// §4, §9): the caller-facing status and policy documents of the callout
// listener, the admin API's documents of the admin listener, and the
// problem document both send. It holds types only, no behaviour, and
// imports nothing of ours but the domain (policy), so that calloutctl
// decodes exactly what the servers encode: the servers build these
// documents (proxy, proxy/admin, proxy/statusdoc), calloutctl reads them.
//
// Times are RFC 3339 in UTC with millisecond precision (time.Time's JSON
// form of a UTC time the store kept in milliseconds); an optional time is
// a pointer left out when not set. Durations of settings are Go duration
// strings ("1m0s"); measured durations are whole milliseconds (…_ms).
package api
