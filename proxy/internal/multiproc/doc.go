// Package multiproc holds the multi-process end-to-end tests of the
// callout-proxy binary: it builds cmd/callout-proxy once per test run,
// starts several replicas sharing one real Redis
// (CALLOUT_TEST_REDIS_URL, see proxy/internal/redistest), and checks the
// promises of contract §3–§5 that only hold across processes: asynchronous
// retries that survive a SIGKILLed replica (lease expiry, re-dispatch by
// another replica, never two attempts at once) and Idempotency-Key
// semantics shared by every replica.
//
// The package has no non-test code; everything is in its _test.go files.
// It lives under proxy/internal, not next to cmd/callout-proxy, because it
// must share proxy/internal/redistest's cross-process lock and flush of the
// real Redis with every other real-Redis test, and Go only lets packages
// under proxy/ import that internal package.
// Without a real Redis configured the tests are skipped, unless
// CALLOUT_TEST_REQUIRE_REAL=1 (CI), which makes them fail instead.
package multiproc
