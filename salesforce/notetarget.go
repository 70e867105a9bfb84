package salesforce

import (
	"context"
	"strings"

	"github.com/calloutproxy/callout-proxy/salesforce/sfapi"
)

// noteTarget returns the fields that say where an owner notification
// leads ("Custom Notification Actions", Actions Developer Guide: targetId,
// a record id, or targetPageRef, a PageReference; one is required): an
// outage's notification opens the Failed_Callout__c record of its first
// dead letter, by the record Id its upsert answered (this round's, in
// s.recordIDs) or, when the record was written in an earlier round, by one
// query of all such records (ids); a disabled endpoint's, or one whose
// record Salesforce does not have yet, the Needs Attention list view.
func noteTarget(n Notice, ids map[string]string) sfapi.Record {
	if id := ids[n.CalloutID]; n.CalloutID != "" && id != "" {
		return sfapi.Record{"targetId": id}
	}
	return sfapi.Record{"targetPageRef": failedCalloutsPage}
}

// noteRecordIDs returns the record Ids of the notifications' dead letters:
// those upserted in this round (s.recordIDs), and the others from one query
// on Callout_Id__c (one API call, only when some are missing). A failed
// query is not the notification's failure: those notifications open the
// list view instead.
func (w *Writer) noteRecordIDs(ctx context.Context, s *sender, notes []*noteWrite) map[string]string {
	ids := map[string]string{}
	var missing []string
	for _, n := range notes {
		if n.notice.CalloutID == "" {
			continue
		}
		if id := s.recordIDs[n.notice.CalloutID]; id != "" {
			ids[n.notice.CalloutID] = id
		} else {
			missing = append(missing, sfapi.QuoteSOQL(n.notice.CalloutID))
		}
	}
	if len(missing) == 0 {
		return ids
	}
	_ = s.call(ctx, func() error {
		return w.o.API.Query(ctx, "SELECT Id, "+ExternalIDField+" FROM "+FailedCalloutObject+" WHERE "+
			ExternalIDField+" IN ("+strings.Join(missing, ", ")+")", func(r sfapi.Record) error {
			root, _ := r[ExternalIDField].(string)
			if id, _ := r["Id"].(string); root != "" && id != "" {
				ids[root] = id
			}
			return nil
		})
	})
	return ids
}

// noteRecordID notes the record Id an upsert of root answered.
func (s *sender) noteRecordID(root, id string) {
	if id == "" {
		return
	}
	if s.recordIDs == nil {
		s.recordIDs = map[string]string{}
	}
	s.recordIDs[root] = id
}
