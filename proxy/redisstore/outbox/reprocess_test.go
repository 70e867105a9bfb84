package outbox

import (
	"testing"
	"time"
)

// TestReprocessClaims: a reprocess request is taken by one replica at a
// time; once finished it stays handled for the dead-letter retention; a
// later request of the same record (a newer stamp) is a new one; a claim
// whose holder died lapses with its lease.
func TestReprocessClaims(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		a, b := e.outbox(), e.outbox()
		ctx := ctxT(t)
		root := mustEnqueue(t, e.store(), "payments", 1)[0]
		stamp := t0.Add(-time.Minute)
		claim := func(s *Outbox, owner string, at time.Time) bool {
			t.Helper()
			ok, err := s.ClaimReprocess(ctx, root, at, owner, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		steps := []struct {
			name  string
			s     *Outbox
			owner string
			at    time.Time
			want  bool
		}{
			{"first replica takes it", a, "replica-a", stamp, true},
			{"second replica is refused", b, "replica-b", stamp, false},
			{"the holder itself is refused too", a, "replica-a", stamp, false},
			{"a newer request of the record is new", b, "replica-b", stamp.Add(time.Millisecond), true},
		}
		for _, st := range steps {
			if got := claim(st.s, st.owner, st.at); got != st.want {
				t.Errorf("%s: claimed %v, want %v", st.name, got, st.want)
			}
		}
		key := reprocessKey(root, stamp)
		if d := e.PTTL(t, key); d <= 0 || d > time.Minute {
			t.Errorf("claim TTL = %v, want the lease (1m)", d)
		}
		if err := a.FinishReprocess(ctx, root, stamp); err != nil {
			t.Fatal(err)
		}
		if d := e.PTTL(t, key); d <= 29*day || d > 30*day {
			t.Errorf("finished TTL = %v, want the dead-letter retention (30 days)", d)
		}
		if claim(b, "replica-b", stamp) {
			t.Error("a finished request was claimed again")
		}
		if e.B.Mini == nil {
			return // the lapse below needs the server's clock
		}
		lapsing := stamp.Add(time.Hour)
		if !claim(a, "replica-a", lapsing) {
			t.Fatal("a fresh request was refused")
		}
		e.B.Mini.FastForward(time.Minute)
		if !claim(b, "replica-b", lapsing) {
			t.Error("a claim whose lease ended was not taken over")
		}
	})
}
