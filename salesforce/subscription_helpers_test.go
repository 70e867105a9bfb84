package salesforce

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/sfsub"
	"github.com/calloutproxy/callout-proxy/salesforce/pubsub"
	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// subEnv is an env whose emulator also serves the Pub/Sub API, with the
// change events of Failed_Callout__c, and the subscription's state in the
// env's Redis.
type subEnv struct {
	*env
	ps      *sfemu.PubSub
	conn    *grpc.ClientConn
	state   *sfsub.State
	counter *countingReplayer
}

func newSubEnv(t testing.TB, o sfemu.PubSubOptions) *subEnv {
	t.Helper()
	e := newEnv(t)
	o.Entities = []string{FailedCalloutObject}
	se := &subEnv{env: e, ps: e.emu.StartPubSub(t, o), counter: newCounting(e.replays("replays"))}
	var err error
	if se.conn, err = grpc.NewClient(se.ps.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = se.conn.Close() })
	if se.state, err = sfsub.New(e.rdb, ChangeEventTopic, nil); err != nil {
		t.Fatal(err)
	}
	se.state.PinScriptTime(e.clk.Now)
	return se
}

// subscriber is the subscription of a replica named owner over state
// (nil: the env's), asking for two events at a time.
func (se *subEnv) subscriber(owner string, state SubscriptionState) *Subscription {
	se.t.Helper()
	return se.subscriberWith(owner, state, se.counter)
}

// subscriberWith is subscriber with its own replayer.
func (se *subEnv) subscriberWith(owner string, state SubscriptionState, rp Replayer) *Subscription {
	se.t.Helper()
	if state == nil {
		state = se.state
	}
	_, p := se.replica(owner, rp)
	s, err := NewSubscription(SubscriptionOptions{Reprocessor: p, PubSub: pubsub.New(se.conn, se.client.PubSubAuth),
		State: state, Batch: 2})
	if err != nil {
		se.t.Fatal(err)
	}
	return s
}

// total is how many replays the counter made in all.
func (c *countingReplayer) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.calls {
		n += v
	}
	return n
}

// waitFor waits (up to 30 s of real time, for a loaded machine) until cond
// holds (proctest.Eventually): the stream runs in its own goroutine, over
// a real gRPC connection.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	proctest.Eventually(t, 30*time.Second, time.Millisecond, what, cond)
}

// crashingState is the subscription state of a replica that dies just as
// it would store its replay id for the (after+1)th time: that save fails
// and crash is called (the test's stand-in for the process ending).
type crashingState struct {
	*sfsub.State
	mu    sync.Mutex
	after int
	crash func()
}

func (c *crashingState) SaveReplayID(ctx context.Context, owner string, id []byte) (bool, error) {
	c.mu.Lock()
	c.after--
	dead := c.after < 0
	c.mu.Unlock()
	if dead {
		c.crash()
		return false, errors.New("the replica died")
	}
	return c.State.SaveReplayID(ctx, owner, id)
}

// gateReplayer is a replayer in front of another: while busy it answers
// every replay policy.ErrReplayBacklogFull (the endpoint's backlog is full); with crash
// set, the first replay it lets through is made and then crash is called
// and context.Canceled returned (the replica died after the replay, before
// anything else). Safe for concurrent use.
type gateReplayer struct {
	next  Replayer
	mu    sync.Mutex
	busy  bool
	asked int
	crash func()
}

func (g *gateReplayer) ReplayOne(ctx context.Context, id, by string) (string, error) {
	g.mu.Lock()
	g.asked++
	busy, crash := g.busy, g.crash
	g.crash = nil
	g.mu.Unlock()
	if busy {
		return "", fmt.Errorf("%w: test", policy.ErrReplayBacklogFull)
	}
	newID, err := g.next.ReplayOne(ctx, id, by)
	if crash != nil && err == nil {
		crash()
		return newID, context.Canceled
	}
	return newID, err
}

func (g *gateReplayer) set(busy bool, crash func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.busy, g.crash = busy, crash
}

func (g *gateReplayer) calls() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.asked
}

// stamp returns the SystemModstamp of root's record: with root, the name
// of its current reprocess request.
func (se *subEnv) stamp(root string) time.Time {
	se.t.Helper()
	st, err := parseStamp(se.record(root)["SystemModstamp"])
	if err != nil {
		se.t.Fatal(err)
	}
	return st
}
