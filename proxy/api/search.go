package api

import "time"

// SearchDoc is the body of GET /admin/v1/search (docs/console.md "Admin
// API routes the console added"): the dead letters matching the query and
// the filters across endpoints, sorted, with their total, and the callouts
// holding the query as an Idempotency-Key on any configured endpoint.
type SearchDoc struct {
	// Query is the search text as given ("" for none).
	Query string `json:"query"`
	// Sort is the order of DeadLetters: a field (dead_lettered_at,
	// endpoint, status, attempts, reason, path), "-" first for descending.
	Sort string `json:"sort"`
	// DeadLetters are the matching dead letters from Offset, at most the
	// limit asked for.
	DeadLetters []DeadLetterSummaryDoc `json:"dead_letters"`
	// Total is how many dead letters match; at most MaxSearchTotal, and
	// TotalCapped says when more may (more than MaxSearchTotal match, or
	// the search stopped after reading 50,000 dead letters that pass the
	// filters): the sort then covers those counted, in index order.
	Total       int  `json:"total"`
	TotalCapped bool `json:"total_capped,omitempty"`
	// Offset is the position of DeadLetters[0] among the matches;
	// NextOffset that of the next page, 0 after the last.
	Offset     int `json:"offset"`
	NextOffset int `json:"next_offset,omitempty"`
	// KeyHolders are the callouts (any state) holding Query as an
	// Idempotency-Key, per endpoint and organisation; empty without a
	// query.
	KeyHolders []SearchKeyHolderDoc `json:"key_holders"`
}

// MaxSearchTotal bounds the dead letters one search counts and sorts.
const MaxSearchTotal = 10000

// SearchKeyHolderDoc is one callout holding an Idempotency-Key.
type SearchKeyHolderDoc struct {
	Endpoint  string `json:"endpoint"`
	Issuer    string `json:"issuer"`
	CalloutID string `json:"callout_id"`
}

// EndpointStatsDoc is the body of GET /admin/v1/endpoints/{name}/stats
// (docs/console.md "Charts"): an endpoint's attempts by outcome class,
// dead letters and attempt latency over a range, from the proxy's own
// per-minute counts.
type EndpointStatsDoc struct {
	Endpoint string `json:"endpoint"`
	// Range is the range's name (1h, 6h, 24h, 7d); StepSeconds each
	// point's length.
	Range       string `json:"range"`
	StepSeconds int    `json:"step_seconds"`
	// Points are oldest first; the last holds the current minute.
	Points []StatsPointDoc `json:"points"`
	// Total sums the points.
	Total StatsPointDoc `json:"total"`
}

// StatsPointDoc is one point of EndpointStatsDoc: from Start for one step,
// the attempts sent by class (contract §2), the dead letters made
// (contract §7), and the latency of the attempts in milliseconds (a
// percentile is its histogram bucket's upper bound; 0 without attempts).
type StatsPointDoc struct {
	Start       time.Time `json:"start"`
	Success     int64     `json:"success"`
	Retryable   int64     `json:"retryable"`
	Permanent   int64     `json:"permanent"`
	DeadLetters int64     `json:"dead_letters"`
	LatencyP50  int64     `json:"latency_p50_ms"`
	LatencyP95  int64     `json:"latency_p95_ms"`
	LatencyP99  int64     `json:"latency_p99_ms"`
	LatencyMean int64     `json:"latency_mean_ms"`
}
