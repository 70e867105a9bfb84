package queues

import (
	"slices"
	"testing"
)

// The organisations of a queue are its counters' 'ii:' tags, and "" when
// its pending items are more than theirs (callouts without an issuer).
func TestOrgsOfCounters(t *testing.T) {
	for _, tt := range []struct {
		name string
		m    map[string]string
		want []string
	}{
		{"empty", map[string]string{}, nil},
		{"issuers only", map[string]string{"ii:a": "2", "ii:b": "1", "bi": "3"}, []string{"a", "b"}},
		{"and callouts without one", map[string]string{"ii:a": "2", "bi": "3"}, []string{"", "a"}},
		{"without issuers", map[string]string{"bi": "1", "bb": "900"}, []string{""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := OrgsOfCounters(tt.m)
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("OrgsOfCounters(%v) = %q, want %q", tt.m, got, tt.want)
			}
		})
	}
}

// SetOrgs reports an organisation queue this replica did not know of, and
// NoteOrg adds one it created a callout in.
func TestSetOrgsReportsANewQueue(t *testing.T) {
	tr, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.SetOrgs("api", map[int][]string{0: {"a"}}) {
		t.Fatal("the first organisation read: not reported new")
	}
	if tr.SetOrgs("api", map[int][]string{0: {"a"}}) {
		t.Fatal("the same organisations again: reported new")
	}
	tr.NoteOrg("api", 3, "b")
	if tr.SetOrgs("api", map[int][]string{0: {"a"}, 3: {"b"}}) {
		t.Fatal("an organisation NoteOrg added: reported new")
	}
	if !tr.SetOrgs("api", map[int][]string{0: {"a", "c"}, 3: {"b"}}) {
		t.Fatal("a new organisation in shard 0: not reported")
	}
}
