package proxy

import (
	"net/http"
	"strconv"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/httpx"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/statusdoc"
)

// duplicate answers a request whose idempotency key is already reserved in
// its scope (issuer, endpoint, key), with Stripe's semantics as contract §5
// states them; the upstream is never called:
//   - another request (method, path, query or body differ): 422;
//   - finished (succeeded or failed): the stored response, replayed with
//     Idempotent-Replayed: true;
//   - scheduled, held, or in flight on a dispatcher: 202, same Callout-Id;
//   - its synchronous first attempt still running: 409 in-flight, class
//     rejected (this request is refused, the first one goes on),
//     Retry-After: 1; asked again with the key after it, the caller gets
//     the first attempt's answer (contract §5, §2 "Generic HTTP clients");
//   - dead-lettered: 409 dead-lettered with the Callout-Id.
func (s *Server) duplicate(w http.ResponseWriter, r *http.Request, in *inbound, ex *policy.Existing) {
	count := func(result string) { s.d.Metrics.Idempotency.WithLabelValues(result).Inc() }
	if !ex.SameRequest {
		count("mismatch")
		s.reject(w, r, in.ep.Name, &problem.Error{Code: problem.IdempotencyMismatch, CalloutID: ex.ID,
			Detail: "this Idempotency-Key was used for a different request (method, path, query or body " +
				"differ); use a new key for a new request"})
		return
	}
	c := ex.Callout
	switch {
	case c.State == policy.Succeeded || c.State == policy.Failed:
		count("replayed")
		replayStored(w, c, s.redactions.For(c.Endpoint))
	case c.State == policy.DeadLettered:
		count("conflict")
		s.reject(w, r, in.ep.Name, deadLetter(c.ID, c.DeadLetterReason, statusdoc.LastOutcome(c),
			"the callout with this Idempotency-Key ended as a dead letter (reason "+string(c.DeadLetterReason)+
				"); replay it with calloutctl or from Salesforce, or send a new key"))
	case c.State == policy.InFlight && len(c.AttemptLog) == 0:
		count("conflict")
		s.reject(w, r, in.ep.Name, &problem.Error{Code: problem.InFlight, CalloutID: c.ID, RetryAfter: 1,
			Detail: "the first attempt of the request with this Idempotency-Key is still running; " +
				"send it again with the same key after Retry-After for its answer, or poll its Callout-Id"})
	default: // scheduled, held, or a later attempt in flight
		count("replayed")
		s.accepted(r.Context(), w, in.ep.Name, c.ID, "")
	}
}

// replayStored sends the stored final response of c again (contract §5). A
// body the store cut at its cap is not sent half: the replay carries the
// original status and headers, no body, and Callout-Replay-Body: omitted.
func replayStored(w http.ResponseWriter, c *policy.Callout, rules *statusdoc.Rules) {
	h := w.Header()
	h.Set("Callout-Id", c.ID)
	h.Set("Idempotent-Replayed", "true")
	out := statusdoc.Outcome(c)
	resp := c.Response
	if resp == nil {
		// Ended without an upstream answer (inline exhaustion of a read
		// cannot happen; kept for safety): the status document says why.
		h.Set("Callout-Outcome", string(out))
		httpx.WriteJSON(w, http.StatusOK, statusdoc.Render(c, rules))
		return
	}
	for k, vs := range resp.Header {
		if !proxyOwned(k) {
			h[k] = append([]string(nil), vs...)
		}
	}
	h.Set("Callout-Outcome", string(out))
	body := resp.Body
	if resp.Truncated {
		body = nil
		h.Set("Callout-Replay-Body", "omitted")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if _, ok := resp.Header["Content-Type"]; !ok {
		h["Content-Type"] = nil
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(body)
}
