package sfemu

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
)

// changeLocked publishes the change event of a record of object (when
// it is an entity of the Pub/Sub server): changed are the fields the
// change set, all of them for a created record. s.mu is held.
func (s *Server) changeLocked(object string, rec, changed Record, created bool) {
	if s.pubsub == nil {
		return
	}
	s.pubsub.publish(object, rec, changed, created, s.o.Now())
}

// changedOf returns the fields of an update whose values differ from the
// record's before it (an update event carries only those: "Change Event
// Message Structure").
func changedOf(before, fields Record) Record {
	out := Record{}
	for k, v := range fields {
		if fmt.Sprint(before[k]) != fmt.Sprint(v) {
			out[k] = v
		}
	}
	return out
}

// publish stores the change event of rec.
func (p *PubSub) publish(object string, rec, changed Record, created bool, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tp := p.byObj[object]
	if tp == nil {
		return
	}
	kind, set := "UPDATE", changed
	if created {
		kind, set = "CREATE", rec
	}
	id, _ := rec["Id"].(string)
	if p.gaps > 0 { // the change event could not be generated: a gap event instead
		p.gaps--
		p.gapLocked(tp, "GAP_"+kind, []string{id}, now)
		return
	}
	var changedAt, nulledAt []int // positions in the schema: the header is field 0
	msg := map[string]any{}
	for i, f := range tp.fields {
		v, ok := set[f]
		msg[f] = nil
		if ok && v != nil && v != "" {
			msg[f] = fmt.Sprint(v)
		}
		if ok && !created {
			changedAt = append(changedAt, i+1)
			if msg[f] == nil {
				nulledAt = append(nulledAt, i+1)
			}
		}
	}
	p.storeLocked(tp, kind, []string{id}, msg, changedAt, nulledAt, now)
}

// PublishGap publishes a gap event of entity: changeType GAP_CREATE,
// GAP_UPDATE, GAP_DELETE, GAP_UNDELETE or GAP_OVERFLOW (then with no ids),
// the header only ("Gap Events", "Overflow Events").
func (p *PubSub) PublishGap(t testing.TB, entity, changeType string, ids ...string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	tp := p.byObj[entity]
	if tp == nil || !strings.HasPrefix(changeType, "GAP_") {
		t.Fatalf("sfemu: no gap event %s of %s", changeType, entity)
	}
	p.gapLocked(tp, changeType, append([]string{}, ids...), p.s.o.Now())
}

// GapNext makes the next n record changes of the Pub/Sub entities publish
// gap events (GAP_CREATE, GAP_UPDATE) instead of their change events.
func (p *PubSub) GapNext(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gaps = n
}

// gapLocked stores a gap event: the header, every field null. p.mu is
// held.
func (p *PubSub) gapLocked(tp *topic, changeType string, ids []string, now time.Time) {
	msg := map[string]any{}
	for _, f := range tp.fields {
		msg[f] = nil
	}
	p.storeLocked(tp, changeType, ids, msg, nil, nil, now)
}

// storeLocked encodes and stores one change event of tp (msg has its
// record fields), its header's bitmaps of changed and nulled field
// positions. p.mu is held.
func (p *PubSub) storeLocked(tp *topic, kind string, ids []string, msg map[string]any, changed, nulled []int,
	now time.Time) {
	p.seq++
	msg["ChangeEventHeader"] = map[string]any{"entityName": tp.entity, "recordIds": ids, "changeType": kind,
		"changeOrigin": "com/salesforce/api/rest", "transactionKey": fmt.Sprintf("tx-%d", p.seq), "sequenceNumber": 1,
		"commitTimestamp": now.UnixMilli(), "commitNumber": int64(p.seq), "commitUser": "005EMU000000001AAA",
		"nulledFields": bitmap(nulled), "diffFields": []string{}, "changedFields": bitmap(changed)}
	payload, err := avro.Marshal(tp.schema, msg)
	if err != nil {
		panic(fmt.Sprintf("sfemu: change event of %s: %v", tp.entity, err)) // a defect of the emulator's schema
	}
	tp.events = append(tp.events, event{seq: p.seq, id: fmt.Sprintf("evt-%d", p.seq), payload: payload, at: now})
}

// bitmap is the Pub/Sub API's bitmap field of top-level field positions
// ("Event Deserialization Considerations": "0x" and the hex digits of a
// number whose bit i is the field at position i, e.g. ['0x650004E0']);
// empty for none.
func bitmap(positions []int) []string {
	if len(positions) == 0 {
		return []string{}
	}
	bits := make([]byte, slices.Max(positions)/8+1) // little-endian bytes
	for _, p := range positions {
		bits[p/8] |= 1 << (p % 8)
	}
	slices.Reverse(bits)
	return []string{"0x" + strings.ToUpper(hex.EncodeToString(bits))}
}
