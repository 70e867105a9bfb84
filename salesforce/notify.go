package salesforce

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/salesforce/sfapi"
)

// NotificationType is the DeveloperName of the custom notification type
// the owner notifications use; it ships in apex-stubs/
// (notificationtypes/Callout_Proxy_Alert.notiftype-meta.xml).
const NotificationType = "Callout_Proxy_Alert"

// notificationAction is the standard invocable action that sends a custom
// notification ("Custom Notification Actions", Actions Developer Guide).
const notificationAction = "customNotificationAction"

// failedCalloutsPage is the target of a notification without a record
// (notetarget.go): the Failed_Callout__c list view Needs Attention (a
// PageReference, as targetPageRef takes it).
const failedCalloutsPage = `{"type":"standard__objectPage","attributes":{"objectApiName":"Failed_Callout__c","actionName":"list"},"state":{"filterName":"Needs_Attention"}}`

// Notification targets: an entry's payload lists those still to reach
// (JSON array); an empty payload means all that apply.
const (
	targetSalesforce = "salesforce"
	targetWebhook    = "webhook"
)

// Notice is an owner notification, as the webhook receives it (JSON).
type Notice struct {
	// Event is "outage" (the first dead letter of an outage) or
	// "endpoint_disabled".
	Event    string `json:"event"`
	Endpoint string `json:"endpoint"`
	// Owner is the endpoint's owner (a Salesforce user id); "" when none.
	Owner string `json:"owner,omitempty"`
	// CalloutID is the outage's first dead letter.
	CalloutID string `json:"callout_id,omitempty"`
	// Reason is the dead letter's reason, or why the endpoint was disabled.
	Reason string    `json:"reason,omitempty"`
	Title  string    `json:"title"`
	Body   string    `json:"body"`
	At     time.Time `json:"at"`
}

// noteWrite is one notification entry and its targets still to reach.
type noteWrite struct {
	it      *item
	notice  Notice
	pending []string
	failed  []string
	err     error
}

// prepNotify: o:{endpoint}:{id} or d:{endpoint}:{ms}, an owner
// notification, to the owner in Salesforce (when the endpoint has one) and
// to the webhook (when configured).
func (w *Writer) prepNotify(ctx context.Context, p *plan, it *item) error {
	if len(it.keys) != 2 {
		return errMalformed
	}
	n, err := w.notice(ctx, it.kind, it.keys[0], it.keys[1])
	if err != nil {
		return err
	}
	var pending []string
	if it.Payload == "" {
		if n.Owner != "" {
			pending = append(pending, targetSalesforce)
		}
		if w.sf.WebhookURL != "" {
			pending = append(pending, targetWebhook)
		}
	} else if json.Unmarshal([]byte(it.Payload), &pending) != nil {
		return errMalformed
	}
	// A target the configuration no longer has (the owner or the webhook
	// was removed) is dropped rather than tried forever.
	pending = slices.DeleteFunc(pending, func(t string) bool {
		return t == targetSalesforce && n.Owner == "" || t == targetWebhook && w.sf.WebhookURL == ""
	})
	if len(pending) == 0 {
		w.log.Info("owner notification has no target (no owner, no webhook); logged only",
			"endpoint", n.Endpoint, "event", n.Event, "reason", n.Reason)
		it.done("", 0, false)
		return nil
	}
	p.notes = append(p.notes, &noteWrite{it: it, notice: n, pending: pending})
	return nil
}

// notice writes the text of an owner notification.
func (w *Writer) notice(ctx context.Context, kind, endpoint, key string) (Notice, error) {
	n := Notice{Endpoint: endpoint, At: w.o.Now().UTC()}
	n.Owner = w.endpoint(endpoint).Owner
	if kind == policy.EntryDisabled {
		st, err := w.o.Store.EndpointState(ctx, endpoint)
		if err != nil {
			return n, err
		}
		n.Event, n.Reason = "endpoint_disabled", st.DisabledReason
		if ms, err := strconv.ParseInt(key, 10, 64); err == nil {
			n.At = time.UnixMilli(ms).UTC()
		}
		n.Title = "Callout Proxy: endpoint " + endpoint + " disabled"
		n.Body = fmt.Sprintf("Endpoint %s was disabled at %s (%s). Its pending callouts became dead letters "+
			"(reason endpoint_disabled) kept as Failed_Callout__c records. An admin must re-enable it.",
			endpoint, n.At.Format(time.RFC3339), n.Reason)
		return n, nil
	}
	n.Event, n.CalloutID = "outage", key
	detail := ""
	c, err := w.get(ctx, key)
	if err != nil {
		return n, err
	}
	if c != nil {
		n.Reason, n.At = string(c.DeadLetterReason), c.FinishedAt.UTC()
		if c.Response != nil {
			detail = fmt.Sprintf(", last status %d", c.Response.Status)
		}
	}
	n.Title = "Callout Proxy: endpoint " + endpoint + " is failing"
	n.Body = fmt.Sprintf("Callouts to %s are failing: callout %s became a dead letter (%s%s). "+
		"Failed callouts are kept as Failed_Callout__c records for reprocessing. "+
		"You are told once per outage.", endpoint, key, n.Reason, detail)
	return n, nil
}

// notificationTypeID returns the id of the Callout_Proxy_Alert custom
// notification type, queried once (SOQL on CustomNotificationType) and
// cached. Errors: an *sfapi.Error; sfapi.Rejected when the type is not deployed.
func (w *Writer) notificationTypeID(ctx context.Context) (string, error) {
	w.mu.Lock()
	id := w.notifType
	w.mu.Unlock()
	if id != "" {
		return id, nil
	}
	err := w.o.API.Query(ctx, "SELECT Id FROM CustomNotificationType WHERE DeveloperName = "+
		sfapi.QuoteSOQL(NotificationType)+" LIMIT 1", func(r sfapi.Record) error {
		id, _ = r["Id"].(string)
		return nil
	})
	if err != nil {
		return "", err
	}
	if id == "" {
		return "", &sfapi.Error{Op: "notification type", Class: sfapi.Rejected,
			Message: "custom notification type " + NotificationType + " is not deployed (apex-stubs/)"}
	}
	w.mu.Lock()
	w.notifType = id
	w.mu.Unlock()
	return id, nil
}

// sendNotes sends the round's owner notifications: one action call for
// every Salesforce notification, one POST per webhook notification.
func (w *Writer) sendNotes(ctx context.Context, s *sender, notes []*noteWrite) {
	var sf []*noteWrite
	for _, n := range notes {
		if slices.Contains(n.pending, targetSalesforce) {
			sf = append(sf, n)
		}
	}
	if len(sf) > 0 {
		w.sendSalesforceNotes(ctx, s, sf)
	}
	for _, n := range notes {
		if !slices.Contains(n.pending, targetWebhook) {
			continue
		}
		if s.stopped() {
			n.fail(targetWebhook, errNotTried, false)
		} else {
			if err := w.postWebhook(ctx, n.notice); err != nil {
				n.fail(targetWebhook, err, true)
			}
		}
	}
	for _, n := range notes {
		w.settleNote(s, n)
	}
}

// sendSalesforceNotes sends custom notifications in one action call.
func (w *Writer) sendSalesforceNotes(ctx context.Context, s *sender, notes []*noteWrite) {
	w.mu.Lock()
	typeID := w.notifType
	w.mu.Unlock()
	var err error
	if typeID == "" {
		err = s.call(ctx, func() error {
			var qerr error
			typeID, qerr = w.notificationTypeID(ctx)
			return qerr
		})
	}
	var results []error
	if err == nil {
		ids := w.noteRecordIDs(ctx, s, notes)
		inputs := make([]sfapi.Record, len(notes))
		for i, n := range notes {
			inputs[i] = sfapi.Record{"customNotifTypeId": typeID, "recipientIds": []string{n.notice.Owner},
				"title": cleanText(n.notice.Title, 250), "body": cleanText(n.notice.Body, 750)}
			maps.Copy(inputs[i], noteTarget(n.notice, ids))
		}
		err = s.call(ctx, func() error {
			var cerr error
			results, cerr = w.o.API.InvokeAction(ctx, notificationAction, inputs)
			return cerr
		})
	}
	for i, n := range notes {
		switch {
		case err != nil:
			n.fail(targetSalesforce, err, !s.notTried(err))
		case results[i] != nil:
			n.fail(targetSalesforce, results[i], true)
		}
	}
}

// fail notes that target failed with err; tried says the write was made
// (not deferred).
func (n *noteWrite) fail(target string, err error, tried bool) {
	n.failed = append(n.failed, target)
	if tried && (n.err == nil || sfapi.ClassOf(err) == sfapi.Rejected) {
		n.err = err
	}
}

// settleNote settles a notification: done when every target was reached;
// else, with the targets still to reach as its payload, retried after a
// failure or deferred when nothing failed but was not tried.
func (w *Writer) settleNote(s *sender, n *noteWrite) {
	if len(n.failed) == 0 {
		n.it.done("", 0, false)
		return
	}
	payload, _ := json.Marshal(n.failed)
	if n.err == nil {
		n.it.later(s.until)
	} else {
		w.retry(n.it, n.err)
		w.log.Warn("owner notification not delivered; trying again", "endpoint", n.notice.Endpoint,
			"event", n.notice.Event, "targets", n.failed, "error", n.err)
	}
	n.it.ack.SetPayload, n.it.ack.Payload = true, string(payload)
}

// postWebhook posts a notice to salesforce.webhook_url as JSON. Errors: a
// network error or a non-2xx answer (sfapi.Retry).
func (w *Writer) postWebhook(ctx context.Context, n Notice) error {
	body, err := json.Marshal(n)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.sf.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return &sfapi.Error{Op: "webhook", Class: sfapi.Rejected, Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.o.Webhook.Do(req)
	if err != nil {
		return &sfapi.Error{Op: "webhook", Class: sfapi.Retry, Err: sfapi.RedactURLError(err)}
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &sfapi.Error{Op: "webhook", Status: resp.StatusCode, Class: sfapi.Retry}
	}
	return nil
}
