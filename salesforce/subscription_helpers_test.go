package salesforce

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

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
	if se.state, err = sfsub.New(e.rdb, ChangeEventTopic); err != nil {
		t.Fatal(err)
	}
	return se
}

// subscriber is the subscription of a replica named owner over state
// (nil: the env's), asking for two events at a time.
func (se *subEnv) subscriber(owner string, state SubscriptionState) *Subscription {
	se.t.Helper()
	if state == nil {
		state = se.state
	}
	_, p := se.replica(owner, se.counter)
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

// waitFor waits (up to 30 s of real time, for a loaded machine) until cond holds: the stream
// runs in its own goroutine, over a real gRPC connection.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
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
