package replay

import (
	"context"

	"github.com/calloutproxy/callout-proxy/policy"
)

// maxResolveHops bounds how far resolve follows a chain of failed replays
// (a dead letter replayed, its replay dead-lettered and replayed, …).
const maxResolveHops = 8

// resolve fills in the Resolution of each replayed dead letter of ds (contract
// §8: Reprocessed / Failed Again), following a failed replay chain that was
// itself replayed to that replay's outcome, up to maxResolveHops; one
// pipelined read (DeadLetters.Summaries) per hop, for the chains still
// being followed. A chain whose record is gone (discarded, expired) stops
// there: its last known outcome stands. Errors: policy.ErrUnavailable.
func (s *Service) resolve(ctx context.Context, ds []policy.DeadLetter) error {
	type follow struct {
		i    int    // index in ds
		next string // the failed chain, a dead letter itself, to look at
	}
	var open []follow
	for i := range ds {
		d := &ds[i]
		if d.ReplayedBy == "" {
			continue
		}
		d.Resolution = policy.ResolutionOf(d.ReplayOutcome)
		if d.Resolution == policy.ResolutionFailedAgain {
			open = append(open, follow{i: i, next: d.ReplayedBy})
		}
	}
	for hop := 0; hop < maxResolveHops && len(open) > 0; hop++ {
		ids := make([]string, len(open))
		for k, f := range open {
			ids[k] = f.next
		}
		sums, err := s.o.DeadLetters.Summaries(ctx, ids)
		if err != nil {
			return err
		}
		var still []follow
		for k, f := range open {
			c := sums[k]
			if c == nil || c.ReplayedBy == "" {
				continue // the failed chain was not replayed: failed again
			}
			r := policy.ResolutionOf(c.ReplayOutcome)
			ds[f.i].Resolution = r
			if r == policy.ResolutionFailedAgain {
				still = append(still, follow{i: f.i, next: c.ReplayedBy})
			}
		}
		open = still
	}
	return nil
}

// resolveMark fills in m.Resolution for dead letter id as resolve does.
// Errors: policy.ErrUnavailable.
func (s *Service) resolveMark(ctx context.Context, id string, m *policy.ReplayMark) error {
	ds := []policy.DeadLetter{{ID: id, ReplayedBy: m.ReplayedBy, ReplayOutcome: m.ReplayOutcome}}
	err := s.resolve(ctx, ds)
	m.Resolution = ds[0].Resolution
	return err
}
