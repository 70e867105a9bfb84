// Package fault is the fault suite (contract §1: "any replica may
// die at any moment: no accepted callout is lost and none ever runs in two
// places at once"). Its tests sit behind the build tag "fault" and are run
// by .ci/fault.sh: they build cmd/callout-proxy once, start their own
// redis-server processes (appendonly yes, appendfsync always) on free
// loopback ports, SIGKILL replicas and Redis under bounded load, take the
// Salesforce emulator (salesforce/sfemu) down for a while, replay a
// Reprocess Requested record from its change event on the emulator's
// Pub/Sub API over TLS (pubsub_test.go), fail a primary
// over with Redis Sentinel, and one primary of a Redis Cluster
// (proctest.StartCluster), while its replication links stall (per
// redis.durability level), hold every byte between the proxy and Redis
// for 5 s (a forwarder of the test's, links_test.go), refuse a start on a
// Sentinel master name nobody monitors or fsync on a Redis before 7.2
// (and run fsync on a 7.2+ one when CALLOUT_TEST_REDIS72_SERVER names it), and put
// toxiproxy (github.com/Shopify/toxiproxy/v2, in-process) between the
// proxy and its upstream. Every scenario sends a fixed number of requests,
// stops by itself and polls with deadlines; it asserts the final state of
// every accepted callout through GET /v1/callouts/{id} and that the
// upstream never saw two concurrent attempts carrying one Idempotency-Key.
package fault
