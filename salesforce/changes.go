package salesforce

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/salesforce/sfapi"
)

// polls are the two polls of one Composite call (Poll, HandleChanges): the
// Discarded records and the Reprocess Requested ones; rep counts what they
// did; renew, when set, is called before each reprocess request (Poll's
// lock).
func (p *Reprocessor) polls(ctx context.Context, rep *ReprocessReport, renew func() error) []sincePoll {
	return []sincePoll{p.w.discardedPoll(ctx, &rep.Discarded), {name: reprocessPoll,
		object: FailedCalloutObject, fields: []string{"Id", ExternalIDField, "Replay_Callout_Id__c", "LastModifiedById"},
		where: "Status__c = " + sfapi.QuoteSOQL(policy.RecordReprocessRequested), each: func(r sfapi.Record, stamp time.Time) error {
			if renew != nil {
				if err := renew(); err != nil {
					return err
				}
			}
			return p.handle(ctx, r, stamp, rep)
		}}}
}

// maxChangedIDs is the most record ids one HandleChanges call asks about
// (two IN lists of 18-character ids stay far below SOQL's 100,000
// characters, "SOQL and SOSL Limits").
const maxChangedIDs = 200

// HandleChanges handles the Failed_Callout__c records of ids (Salesforce
// record Ids, as change events name them) exactly as a poll handles them
// (Poll: the same claims, replays and status writes), asking Salesforce
// for their current state in one Composite call of the two queries per
// maxChangedIDs ids, with `Id IN (…)` instead of the watermark (which it
// leaves alone). A record no longer Discarded or Reprocess Requested is
// not returned by the queries and so ignored. It returns what it did and
// the ids to look at again later. Errors: the call's, the store's;
// nothing is then known to be handled.
func (p *Reprocessor) HandleChanges(ctx context.Context, ids []string) (Changes, error) {
	var out Changes
	rep := &out.Report
	if paused, err := p.w.paused(ctx); paused || err != nil {
		out.Deferred = ids
		return out, err
	}
	for len(ids) > 0 {
		n := min(len(ids), maxChangedIDs)
		chunk := ids[:n]
		ids = ids[n:]
		quoted := make([]string, len(chunk))
		for i, id := range chunk {
			quoted[i] = sfapi.QuoteSOQL(id)
		}
		in := "Id IN (" + strings.Join(quoted, ", ") + ")"
		polls := p.polls(ctx, rep, nil)
		subs := make([]sfapi.Subrequest, len(polls))
		for i, q := range polls {
			fields := q.fields
			if !slices.Contains(fields, "Id") {
				fields = append([]string{"Id"}, fields...)
			}
			subs[i] = sfapi.QuerySubrequest(q.name, fmt.Sprintf("SELECT %s, SystemModstamp FROM %s WHERE %s AND %s ORDER BY SystemModstamp ASC",
				strings.Join(fields, ", "), q.object, q.where, in))
		}
		res, err := p.w.o.API.Composite(ctx, subs)
		if err != nil {
			return out, err
		}
		for i, q := range polls {
			records, err := sfapi.QueryResults(res[i])
			if err != nil {
				return out, fmt.Errorf("salesforce: changes %s: %w", q.name, err)
			}
			for _, r := range records {
				stamp, err := parseStamp(r["SystemModstamp"])
				if err != nil {
					return out, fmt.Errorf("SystemModstamp %v: %w", r["SystemModstamp"], err)
				}
				if err := q.each(r, stamp); err != nil && !errors.Is(err, ErrPollAgain) {
					return out, err // ErrPollAgain: the request is in rep.DeferredIDs
				}
			}
		}
	}
	out.Deferred, out.Claimed = rep.DeferredIDs, rep.ClaimedIDs
	return out, nil
}

// Changes is what HandleChanges did.
type Changes struct {
	Report ReprocessReport
	// Deferred are the record ids of requests to try again after
	// ReprocessLease: the endpoint's backlog is full, or Salesforce writes
	// are paused.
	Deferred []string
	// Claimed are the record ids of requests claimed already: by another
	// replica (whose claim lapses after ReprocessLease if it died) or
	// handled before.
	Claimed []string
}
