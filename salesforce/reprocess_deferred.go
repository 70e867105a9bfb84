package salesforce

import (
	"context"
	"slices"
	"time"
)

// DeferredRequests are the reprocess requests to look at again later, by
// Salesforce record Id, kept in Redis so that whichever replica comes next
// finds them (*sfsub.State implements it), timed on Redis's clock
// (contract §1: durations, never a replica's instants): Defer notes ids due
// after from now (a new time for an id noted already); Due takes up to
// limit of the ids due now and moves each lease ahead (a replica dying
// before Done leaves them due again then); Done forgets ids.
type DeferredRequests interface {
	Defer(ctx context.Context, ids []string, after time.Duration) error
	Due(ctx context.Context, lease time.Duration, limit int) ([]string, error)
	Done(ctx context.Context, ids []string) error
}

// changes hands ids to HandleChanges and defers, to ReprocessLease from
// now, the requests to look at again: the deferred ones each time, the
// ones claimed by another replica only when this is not already a second
// look (retried: a claim still there then is a finished request, or its
// replica died and the claim lapses); a second look forgets the rest.
// Errors: HandleChanges', d's; the Changes are what was done before.
func (p *Reprocessor) changes(ctx context.Context, d DeferredRequests, ids []string, retried bool) (Changes, error) {
	res, err := p.HandleChanges(ctx, ids)
	if err != nil {
		return res, err
	}
	again := res.Deferred
	if !retried {
		again = append(again, res.Claimed...)
	}
	if err := d.Defer(ctx, again, ReprocessLease); err != nil || !retried {
		return res, err
	}
	settled := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return slices.Contains(again, id) })
	return res, d.Done(ctx, settled)
}

// lookAgain handles the deferred requests of d whose time came, up to
// maxChangedIDs of them (changes, a second look). Errors: changes', d's.
func (p *Reprocessor) lookAgain(ctx context.Context, d DeferredRequests) (Changes, error) {
	due, err := d.Due(ctx, ReprocessLease, maxChangedIDs)
	if err != nil || len(due) == 0 {
		return Changes{}, err
	}
	return p.changes(ctx, d, due, true)
}
