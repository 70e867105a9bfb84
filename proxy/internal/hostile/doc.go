// Package hostile is the hostile-caller suite (contract §10: "no
// caller can exhaust the proxy for others"). Its tests sit behind the build
// tag "hostile" and are run by .ci/hostile.sh: they build cmd/callout-proxy
// once, start one redis-server and one proxy on free loopback ports, and
// replay the attacks of the issue against the real binary — idle
// connections beyond the connection cap, slow headers and slow bodies, 1 MB
// headers × 400, 12 MiB bodies × 80 concurrent, 11 MiB responses × 100,
// answers never read, and on an endpoint shared by organisations org-a's
// timeouts (its breaker partition opens, the others' callouts and reads go
// on) and org-a's backlog of 300 (org-b's callouts start within 2 s) —
// while a monitor asks /healthz, the admin listener's /metrics and a small
// callout of a second org every 100 ms, each on a new connection, and
// requires every answer (none failed within 10 s, none late past 1 s twice
// in a row, at most a tenth late); the proxy's RSS (VmRSS) is sampled
// throughout and must stay under limits.max_inflight_bytes + 150 MiB, and
// Redis's growth per attack is measured and bounded. Every attack sends a
// fixed number of requests; every wait has a deadline; only loopback is
// used.
package hostile
