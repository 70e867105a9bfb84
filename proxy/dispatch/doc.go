// Package dispatch makes the attempts the caller is not waiting for: every
// replica runs a Dispatcher that claims due callouts from the Redis delay
// queue under a lease, dispatches them, and completes each in one atomic
// step (contract §3, ARCHITECTURE.md "Data flow" 2). The decision after an attempt is
// policy.Decide, the same one the synchronous ingress applies.
package dispatch
