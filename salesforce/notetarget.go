package salesforce

import (
	"context"
	"encoding/json"
	"strings"
)

// noteTarget returns the fields that say where an owner notification
// leads ("Custom Notification Actions", Actions Developer Guide: targetId,
// a record id, or targetPageRef, a PageReference; one is required): an
// outage's notification opens the Failed_Callout__c record of its first
// dead letter, by the record Id its upsert answered (this round's, in
// s.recordIDs) or, when the record was written in an earlier round, by one
// query of all such records (ids); a disabled endpoint's, or one whose
// record Salesforce does not have yet, the Needs Attention list view.
func noteTarget(n Notice, ids map[string]string) Record {
	if id := ids[n.CalloutID]; n.CalloutID != "" && id != "" {
		return Record{"targetId": id}
	}
	return Record{"targetPageRef": failedCalloutsPage}
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
			missing = append(missing, QuoteSOQL(n.notice.CalloutID))
		}
	}
	if len(missing) == 0 {
		return ids
	}
	_ = s.call(ctx, func() error {
		return w.o.API.Query(ctx, "SELECT Id, "+ExternalIDField+" FROM "+FailedCalloutObject+" WHERE "+
			ExternalIDField+" IN ("+strings.Join(missing, ", ")+")", func(r Record) error {
			root, _ := r[ExternalIDField].(string)
			if id, _ := r["Id"].(string); root != "" && id != "" {
				ids[root] = id
			}
			return nil
		})
	})
	return ids
}

// collectionIDs returns the record Ids of an sObject Collections answer, in
// order ("" for a record not saved): each SaveResult/UpsertResult carries
// its record's id ("Upsert Records Using sObject Collections").
func collectionIDs(r SubResult, n int) []string {
	var results []saveResult
	out := make([]string, n)
	if json.Unmarshal(r.Body, &results) != nil || len(results) != n {
		return out
	}
	for i, res := range results {
		if res.Success {
			out[i] = res.ID
		}
	}
	return out
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
