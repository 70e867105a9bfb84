package redact_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/redact"
)

// FuzzJSONBody checks, for any body: no panic; valid JSON in gives valid
// JSON out, recognised; every value at a configured path in the output is
// the mask; redacting again changes nothing; a body not recognised comes back
// unchanged, and only an invalid or top-level scalar JSON body is not
// recognised.
func FuzzJSONBody(f *testing.F) {
	paths := []string{"a", "b.c", "items.card.number"}
	for _, seed := range []string{
		`{"a":1}`, `[{"b":{"c":[1,{"x":2}]}}]`, `{"items":[{"card":{"number":"4111"}},[{"card":{"number":1e400}}]]}`,
		`{"a":{"a":"a"},"b":{"c":null},"b":[{"c":true}]}`, "  {\"a\"\t:\n\"\\u00e9\\\"\" }", `{"a":"x",}`,
		`[1.10, -0, "a"]`, `{"\ud800":1}`, `{"\u0061":1,"b":{"\u0063":[2]}}`, `"a"`, `{`, `[[[[{"a":[]}]]]]`, "{\"a\":\"\xff\"}",
	} {
		f.Add(seed)
	}
	rules := redact.New(config.Redact{JSONFields: paths}, nil)
	f.Fuzz(func(t *testing.T, in string) {
		out, ok := rules.JSONBody("application/json", []byte(in))
		trimmed := strings.TrimLeft(in, " \t\r\n")
		container := trimmed != "" && (trimmed[0] == '{' || trimmed[0] == '[')
		if valid := json.Valid([]byte(in)); ok != (valid && container) {
			t.Fatalf("recognised = %v for %q (valid JSON %v, object or array %v)", ok, in, valid, container)
		}
		if !ok {
			if string(out) != in {
				t.Fatalf("unrecognised body changed: %q -> %q", in, out)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("output is not JSON: %q -> %q", in, out)
		}
		if again, _ := rules.JSONBody("application/json", out); !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, out, again)
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("output does not decode: %v", err)
		}
		for _, p := range paths {
			checkMasked(t, v, strings.Split(p, "."), p)
		}
	})
}

// checkMasked fails unless every value reachable at path (arrays being
// transparent) is the mask.
func checkMasked(t *testing.T, v any, path []string, full string) {
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			checkMasked(t, e, path, full)
		}
		if len(path) == 0 {
			t.Fatalf("array left at %s", full)
		}
	case map[string]any:
		if len(path) == 0 {
			t.Fatalf("object left at %s", full)
		}
		if e, ok := v[path[0]]; ok {
			checkMasked(t, e, path[1:], full)
		}
	default:
		if len(path) == 0 && v != redact.Mask {
			t.Fatalf("value %v left at %s", v, full)
		}
	}
}

// FuzzQuery checks, for any raw query: no panic; the '&'-separated segments
// keep their number, and each one either stays byte-for-byte or keeps its
// name with the value masked; redacting again changes nothing.
func FuzzQuery(f *testing.F) {
	for _, seed := range []string{"", "a=1&api_key=2", "api%5Fkey=%zz&&x", "api_key", "=&=="} {
		f.Add(seed)
	}
	rules := redact.New(config.Redact{Query: []string{"api_key", "a b"}}, nil)
	f.Fuzz(func(t *testing.T, in string) {
		out := rules.Query(in)
		inSegs, outSegs := strings.Split(in, "&"), strings.Split(out, "&")
		if len(inSegs) != len(outSegs) {
			t.Fatalf("segments %q -> %q", in, out)
		}
		for i, seg := range inSegs {
			name, _, _ := strings.Cut(seg, "=")
			if outSegs[i] != seg && outSegs[i] != name+"="+redact.Mask {
				t.Fatalf("segment %q became %q", seg, outSegs[i])
			}
		}
		if again := rules.Query(out); again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, out, again)
		}
	})
}

// FuzzText checks that Text never panics, is idempotent and leaves a text
// without a credential word and without '?' or '&' unchanged.
func FuzzText(f *testing.F) {
	for _, seed := range []string{"Bearer x", "basic\tabc def", `"https://h/?api_key=1#x"`, "Bearer", "?api_key="} {
		f.Add(seed)
	}
	rules := redact.New(config.Redact{Query: []string{"api_key"}}, nil)
	f.Fuzz(func(t *testing.T, in string) {
		out := rules.Text(in)
		if again := rules.Text(out); again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, out, again)
		}
		lower := strings.ToLower(in)
		if !strings.Contains(lower, "bearer") && !strings.Contains(lower, "basic") &&
			!strings.ContainsAny(in, "?&") && out != in {
			t.Fatalf("text without credentials changed: %q -> %q", in, out)
		}
	})
}
