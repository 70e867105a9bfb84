package script

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/redis/go-redis/v9"
)

type item struct {
	Rec string `lua:"rec,key"`
	ID  string `lua:"id"`
	Due int64  `lua:"due"`
}

type echoArgs struct {
	Due     string        `lua:"due,key"`
	More    []string      `lua:"more,key"`
	Now     int64         `lua:"now"`
	Mode    string        `lua:"mode"`
	Probe   bool          `lua:"probe"`
	TTL     time.Duration `lua:"ttl"`
	Ratio   float64       `lua:"ratio"`
	Raw     []byte        `lua:"raw"`
	IDs     []string      `lua:"ids"`
	Items   []item        `lua:"items"`
	Ignored string        // no tag: not sent
}

type echoItem struct {
	Rec string `lua:"rec"`
	ID  string `lua:"id"`
	Due int64  `lua:"due"`
}

type echoReply struct {
	Due    string        `lua:"due"`
	More   []string      `lua:"more"`
	Now    int64         `lua:"now"`
	Mode   string        `lua:"mode"`
	Probe  bool          `lua:"probe"`
	TTL    time.Duration `lua:"ttl"`
	Ratio  float64       `lua:"ratio"`
	Raw    []byte        `lua:"raw"`
	IDs    []string      `lua:"ids"`
	Items  []echoItem    `lua:"items"`
	NKeys  int           `lua:"nkeys"`
	Absent string        `lua:"absent"`
	Helper string        `lua:"helper"`
}

// echo answers every argument back by name, reading them only through K
// and A, plus a value from the prelude (a shared helper).
const echo = `
local more = {}
for i, v in ipairs(K.more) do more[i] = v end
local items = {}
for i, e in ipairs(A.items) do items[i] = {'rec', e.rec, 'id', e.id, 'due', e.due} end
return {'due', K.due, 'more', more, 'now', A.now, 'mode', A.mode,
  'probe', A.probe and 1 or 0, 'ttl', A.ttl, 'ratio', tostring(A.ratio), 'raw', A.raw,
  'ids', A.ids, 'items', items, 'nkeys', #KEYS, 'absent', false, 'helper', helper()}
`

const prelude = `local function helper() return 'from the prelude' end`

func TestArgumentsAndReplyByName(t *testing.T) {
	s, err := New[echoArgs, echoReply](nil, "echo", echo, prelude)
	if err != nil {
		t.Fatal(err)
	}
	a := echoArgs{
		Due: "{t}due", More: []string{"{t}m1", "{t}m2"}, Now: 1_700_000_000_123, Mode: "b", Probe: true,
		TTL: 90 * time.Second, Ratio: 0.25, Raw: []byte{0, 1, 0xff}, IDs: []string{"x", "", "z"},
		Items: []item{{Rec: "{t}r1", ID: "a", Due: 5}, {Rec: "{t}r2", ID: "b", Due: 6}}, Ignored: "no",
	}
	keys, argv := s.Encode(&a)
	if want := []string{"{t}due", "{t}m1", "{t}m2", "{t}r1", "{t}r2"}; strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Fatalf("KEYS = %q, want %q", keys, want)
	}
	for _, v := range argv {
		if p, ok := v.(*string); v == "no" || ok && *p == "no" {
			t.Fatalf("an untagged field was sent: %q", argv)
		}
	}
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			got, err := s.Run(context.Background(), b.Client, &a)
			if err != nil {
				t.Fatal(err)
			}
			want := echoReply{Due: a.Due, More: a.More, Now: a.Now, Mode: "b", Probe: true, TTL: a.TTL,
				Ratio: 0.25, Raw: a.Raw, IDs: a.IDs, NKeys: 5, Helper: "from the prelude",
				Items: []echoItem{{Rec: "{t}r1", ID: "a", Due: 5}, {Rec: "{t}r2", ID: "b", Due: 6}}}
			if !equalReply(got, want) {
				t.Fatalf("reply\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func equalReply(a, b echoReply) bool {
	return a.Due == b.Due && strings.Join(a.More, ",") == strings.Join(b.More, ",") && a.Now == b.Now &&
		a.Mode == b.Mode && a.Probe == b.Probe && a.TTL == b.TTL && a.Ratio == b.Ratio &&
		string(a.Raw) == string(b.Raw) && strings.Join(a.IDs, ",") == strings.Join(b.IDs, ",") &&
		a.NKeys == b.NKeys && a.Absent == b.Absent && a.Helper == b.Helper && len(a.Items) == len(b.Items) &&
		(len(a.Items) == 0 || (a.Items[0] == b.Items[0] && a.Items[1] == b.Items[1]))
}

type noArgs struct{}

type oneReply struct {
	State string `lua:"state"`
	N     int    `lua:"n"`
}

func TestReplyErrors(t *testing.T) {
	for _, tt := range []struct {
		name, body, want string
	}{
		{"unknown name", `return {'state', 'x', 'surprise', 1}`, `unknown name "surprise"`},
		{"odd pairs", `return {'state', 'x', 'n'}`, "odd number"},
		{"not an array", `return 'plain'`, "want an array"},
		{"bad integer", `return {'n', 'twelve'}`, "n:"},
		{"script error", `return redis.error_reply('BOOM refused')`, "BOOM refused"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New[noArgs, oneReply](nil, tt.name, tt.body)
			if err != nil {
				t.Fatal(err)
			}
			b := redistest.Backends(t)[0]
			_, err = s.Run(context.Background(), b.Client, &noArgs{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestNilReplyIsTheZeroReply(t *testing.T) {
	s, err := New[noArgs, oneReply](nil, "nil", `return false`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Run(context.Background(), redistest.Backends(t)[0].Client, &noArgs{})
	if err != nil || got != (oneReply{}) {
		t.Fatalf("got %+v, %v; want the zero reply", got, err)
	}
}

func TestFallsBackToEvalAfterAFlush(t *testing.T) {
	s, err := New[incArgs, incReply](nil, "inc", `return {'n', redis.call('INCRBY', K.key, A.by)}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			flush := func() {
				var err error
				if cc, ok := b.Client.(*redis.ClusterClient); ok {
					err = cc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return c.ScriptFlush(ctx).Err() })
				} else {
					err = b.Client.ScriptFlush(ctx).Err()
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			run := func() []int64 { return queueIncs(t, ctx, b.Client, s) }
			// Flushed: every EVALSHA answers NOSCRIPT and runs by EVAL, once each.
			flush()
			if got := run(); got[0] != 1 || got[1] != 3 || got[2] != 6 {
				t.Fatalf("first pipeline = %v, want [1 3 6]", got)
			}
			if _, err := s.Run(ctx, b.Client, &incArgs{Key: "{t}n", By: 0}); err != nil {
				t.Fatal(err)
			}
			if got := run(); got[0] != 7 || got[2] != 12 {
				t.Fatalf("second pipeline = %v, want [7 9 12]", got)
			}
			// Flushed in the middle of the chain: the same again, nothing lost or run twice.
			flush()
			if got := run(); got[0] != 13 || got[2] != 18 {
				t.Fatalf("pipeline after a flush = %v, want [13 15 18]", got)
			}
			// Run on its own after a flush: NOSCRIPT, then EVAL, once.
			flush()
			if r, err := s.Run(ctx, b.Client, &incArgs{Key: "{t}n", By: 2}); err != nil || r.N != 20 {
				t.Fatalf("Run after a flush = %+v, %v; want n 20", r, err)
			}
		})
	}
}

func TestLoadFromFS(t *testing.T) {
	fsys := fstest.MapFS{"lua/hello.lua": {Data: []byte(`return {'state', A.who}`)}}
	type helloArgs struct {
		Who string `lua:"who"`
	}
	s, err := Load[helloArgs, oneReply](nil, fsys, "hello")
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != "hello" || !strings.HasPrefix(s.Source(), "local K, A = {}, {}") {
		t.Fatalf("name %q, source %q", s.Name(), s.Source())
	}
	got, err := s.Run(context.Background(), redistest.Backends(t)[0].Client, &helloArgs{Who: "world"})
	if err != nil || got.State != "world" {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := Load[helloArgs, oneReply](nil, fsys, "missing"); err == nil {
		t.Fatal("a missing script loaded")
	}
}

func TestTypesRefused(t *testing.T) {
	type badName struct {
		X string `lua:"Bad-Name"`
	}
	type badType struct {
		X map[string]string `lua:"x"`
	}
	type intKey struct {
		X int `lua:"x,key"`
	}
	type twice struct {
		X string `lua:"x"`
		Y string `lua:"x"`
	}
	type deep struct {
		X []struct {
			Y []item `lua:"y"`
		} `lua:"x"`
	}
	type structArg struct {
		X item `lua:"x"`
	}
	for name, err := range map[string]error{
		"name":    errOf(New[badName, oneReply](nil, "t", "")),
		"type":    errOf(New[badType, oneReply](nil, "t", "")),
		"int key": errOf(New[intKey, oneReply](nil, "t", "")),
		"twice":   errOf(New[twice, oneReply](nil, "t", "")),
		"deep":    errOf(New[deep, oneReply](nil, "t", "")),
		"struct":  errOf(New[structArg, oneReply](nil, "t", "")),
		"reply key": errOf(New[noArgs, struct {
			X string `lua:"x,key"`
		}](nil, "t", "")),
		"not struct": errOf(New[int, oneReply](nil, "t", "")),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func errOf[T any](_ T, err error) error { return err }

// queueIncs queues three runs of s on c's pipeline, adding 1, 2 and 3 to
// {t}n, and returns their replies in order (each through Call.Result, so
// a missing script is run again there).
func queueIncs(t *testing.T, ctx context.Context, c redis.UniversalClient, s *Script[incArgs, incReply]) []int64 {
	t.Helper()
	calls := make([]*Call[incArgs, incReply], 3)
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range calls {
			calls[i] = s.Queue(ctx, p, &incArgs{Key: "{t}n", By: int64(i + 1)})
		}
		return nil
	})
	var got []int64
	for _, call := range calls {
		r, err := call.Result(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.N)
	}
	return got
}
