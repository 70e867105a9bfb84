package admin

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

var (
	_ Callouts = (*fakeCallouts)(nil)
	_ Keys     = (*fakeKeys)(nil)
)

// fakeCallouts is a Callouts whose method is its Fn field.
type fakeCallouts struct {
	PendingFn func(ctx context.Context, endpoint string, state policy.State, offset, limit int) ([]*policy.Callout, int, error)
}

func (f *fakeCallouts) Pending(ctx context.Context, endpoint string, state policy.State, offset, limit int) ([]*policy.Callout, int, error) {
	return f.PendingFn(ctx, endpoint, state, offset, limit)
}

// fakeKeys is a Keys whose method is its Fn field.
type fakeKeys struct {
	KeyHolderFn func(ctx context.Context, issuer, endpoint, key string) (string, error)
}

func (f *fakeKeys) KeyHolder(ctx context.Context, issuer, endpoint, key string) (string, error) {
	return f.KeyHolderFn(ctx, issuer, endpoint, key)
}

// calloutsHandler is the admin handler with only the callout list and key
// routes, over fakes.
func calloutsHandler(t *testing.T, c Callouts, k Keys) http.Handler {
	t.Helper()
	cfg := admConfig()
	cfg.Auth.Issuers = []string{"https://a.my.salesforce.com", "https://b.my.salesforce.com"}
	tokens := testTokens(t, admWriteToken, admReadToken)
	return New(Deps{Config: cfg, Tokens: tokens, Callouts: c, Keys: k,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func get(t *testing.T, h http.Handler, path, token string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestListCalloutsRoute(t *testing.T) {
	due := time.UnixMilli(1_700_000_060_000)
	var asked struct {
		endpoint      string
		state         policy.State
		offset, limit int
	}
	fake := &fakeCallouts{PendingFn: func(_ context.Context, endpoint string, state policy.State, offset, limit int) ([]*policy.Callout, int, error) {
		asked.endpoint, asked.state, asked.offset, asked.limit = endpoint, state, offset, limit
		if endpoint == "crm-api" {
			return nil, 0, policy.ErrUnavailable
		}
		return []*policy.Callout{{ID: "c1", Endpoint: endpoint, State: state, Method: "POST", Path: "/v1/x",
			IdempotencyKey: "k", Attempts: 2, CreatedAt: due.Add(-time.Minute), NextAttemptAt: due}}, offset + limit, nil
	}}
	h := calloutsHandler(t, fake, nil)

	var list api.CalloutList
	admDecode(t, get(t, h, "/admin/v1/callouts?endpoint=pay-api&state=held&cursor=20&limit=10", admReadToken),
		http.StatusOK, "application/json", &list)
	if asked.endpoint != "pay-api" || asked.state != policy.Held || asked.offset != 20 || asked.limit != 10 {
		t.Fatalf("asked %+v", asked)
	}
	if len(list.Items) != 1 || list.Items[0].ID != "c1" || list.Items[0].NextAttemptAt == nil ||
		!list.Items[0].NextAttemptAt.Equal(due) || list.NextCursor != "30" {
		t.Fatalf("list %+v", list)
	}
	get(t, h, "/admin/v1/callouts?endpoint=pay-api&state=held", admReadToken)
	if asked.offset != 0 || asked.limit != 100 {
		t.Fatalf("defaults: %+v", asked)
	}
	for _, tt := range []struct {
		path, token string
		code        problem.Code
	}{
		{"/admin/v1/callouts?endpoint=pay-api&state=held", "", problem.Unauthorized},
		{"/admin/v1/callouts?endpoint=nope&state=held", admReadToken, problem.UnknownEndpoint},
		{"/admin/v1/callouts?endpoint=pay-api&state=succeeded", admReadToken, problem.InvalidRequest},
		{"/admin/v1/callouts?endpoint=pay-api&state=held&limit=1001", admReadToken, problem.InvalidRequest},
		{"/admin/v1/callouts?endpoint=pay-api&state=held&limit=0", admReadToken, problem.InvalidRequest},
		{"/admin/v1/callouts?endpoint=pay-api&state=held&cursor=x", admReadToken, problem.InvalidRequest},
		{"/admin/v1/callouts?endpoint=crm-api&state=held", admReadToken, problem.StoreUnavailable},
	} {
		wantProblem(t, get(t, h, tt.path, tt.token), tt.code)
	}
}

func TestKeyHoldersRoute(t *testing.T) {
	var asked []string
	fake := &fakeKeys{KeyHolderFn: func(_ context.Context, issuer, endpoint, key string) (string, error) {
		asked = append(asked, issuer)
		switch {
		case key == "down":
			return "", policy.ErrUnavailable
		case issuer == "https://b.my.salesforce.com" && key == "k":
			return "c-b", nil
		}
		return "", policy.ErrNotFound
	}}
	h := calloutsHandler(t, nil, fake)
	var doc api.IdempotencyKeyDoc
	admDecode(t, get(t, h, "/admin/v1/idempotency-keys?endpoint=pay-api&key=k", admReadToken),
		http.StatusOK, "application/json", &doc)
	if len(asked) != 2 || len(doc.Holders) != 1 || doc.Holders[0] != (api.KeyHolderDoc{Issuer: "https://b.my.salesforce.com", CalloutID: "c-b"}) {
		t.Fatalf("asked %v, doc %+v", asked, doc)
	}
	asked = nil
	wantProblem(t, get(t, h, "/admin/v1/idempotency-keys?endpoint=pay-api&key=k&issuer=https://a.my.salesforce.com", admReadToken),
		problem.NotFound)
	if len(asked) != 1 || asked[0] != "https://a.my.salesforce.com" {
		t.Fatalf("asked %v, want only the given issuer", asked)
	}
	wantProblem(t, get(t, h, "/admin/v1/idempotency-keys?endpoint=pay-api", admReadToken), problem.InvalidRequest)
	wantProblem(t, get(t, h, "/admin/v1/idempotency-keys?endpoint=pay-api&key=down", admReadToken), problem.StoreUnavailable)
	wantProblem(t, get(t, h, "/admin/v1/idempotency-keys?endpoint=pay-api&key=k", ""), problem.Unauthorized)
}
