// Package dispatch makes the attempts the caller is not waiting for: every
// replica runs a Dispatcher that claims due callouts from the Redis delay
// queue under a lease and makes each attempt with the one attempt runner
// the synchronous ingress uses too (proxy/attempt: send, classify,
// policy.Decide, one atomic completion; contract §3, ARCHITECTURE.md "Data
// flow" 2). What it adds is its own: fair claims across endpoints, bounded
// slots, the reaper and the breaker watcher.
package dispatch
