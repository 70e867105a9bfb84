// Package openapicheck holds a listener's real router to its OpenAPI 3.1
// document in docs/openapi (docs/openapi/README.md): the document loads and
// validates, every route the router serves is described and every
// described operation is served, and the named schemas list exactly the
// JSON fields of the Go types the handlers write. The tests of proxy
// (callout.yaml) and proxy/admin (admin.yaml) call it; problem types are
// checked by proxy/problem's test (problem.yaml).
package openapicheck

import (
	"context"
	"net/http"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"

	"github.com/calloutproxy/callout-proxy/proxy/httpx"
)

// Load loads and validates docs/openapi/name (its references to the other
// documents there followed). It fails t when the file is missing or not a
// valid OpenAPI document.
func Load(t testing.TB, name string) *openapi3.T {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(here), "..", "..", "..", "docs", "openapi", name)
	l := openapi3.NewLoader()
	l.IsExternalRefsAllowed = true
	doc, err := l.LoadFromFile(path)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("%s: openapi %q, want 3.1.0", name, doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("%s does not validate: %v", name, err)
	}
	return doc
}

// Routes checks that doc describes exactly the routes r serves: each
// method and pattern chi.Walk finds — the methods httpx.Guard lets reach
// a router only, and none under a prefix in skip (parts of the listener a
// document leaves out, said in its header) — is an operation of doc, and
// each operation of doc is served. A path item's pattern is its x-route
// extension when it has one (an OpenAPI path parameter holds no "/"),
// else its path.
func Routes(t testing.TB, doc *openapi3.T, r chi.Routes, skip ...string) {
	t.Helper()
	served := map[string]bool{}
	err := chi.Walk(r, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if !httpx.IsAllowedMethod(method) {
			return nil
		}
		for _, p := range skip {
			if strings.HasPrefix(route, p) {
				return nil
			}
		}
		served[method+" "+route] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	described := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		pattern := path
		if x, ok := item.Extensions["x-route"].(string); ok {
			pattern = x
		}
		for method := range item.Operations() {
			described[method+" "+pattern] = true
		}
	}
	for _, k := range sorted(served) {
		if !described[k] {
			t.Errorf("served but not described in the OpenAPI document: %s", k)
		}
	}
	for _, k := range sorted(described) {
		if !served[k] {
			t.Errorf("described in the OpenAPI document but not served: %s", k)
		}
	}
}

// Schemas checks that each schema of doc named in types has exactly the
// properties of the JSON encoding of its Go type (the json tags, embedded
// structs' fields included, "-" left out); a schema made of allOf counts
// the properties of every part.
func Schemas(t testing.TB, doc *openapi3.T, types map[string]any) {
	t.Helper()
	for name, v := range types {
		ref := doc.Components.Schemas[name]
		if ref == nil || ref.Value == nil {
			t.Errorf("schema %s: not in the document", name)
			continue
		}
		got := properties(ref.Value)
		want := jsonFields(reflect.TypeOf(v))
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("schema %s has properties %v; its Go type %T encodes %v", name, got, v, want)
		}
	}
}

// Enum checks that schema name of doc is an enum of exactly want (in any
// order): the words of contract §12 as the code spells them.
func Enum[S ~string](t testing.TB, doc *openapi3.T, name string, want ...S) {
	t.Helper()
	ref := doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		t.Errorf("schema %s: not in the document", name)
		return
	}
	var got, w []string
	for _, v := range ref.Value.Enum {
		s, _ := v.(string)
		got = append(got, s)
	}
	for _, v := range want {
		w = append(w, string(v))
	}
	sort.Strings(got)
	sort.Strings(w)
	if !slices.Equal(got, w) {
		t.Errorf("schema %s: enum %v, the code's words %v", name, got, w)
	}
}

// properties are the property names of s and of the parts of its allOf.
func properties(s *openapi3.Schema) []string {
	var out []string
	for k := range s.Properties {
		out = append(out, k)
	}
	for _, part := range s.AllOf {
		if part.Value != nil {
			out = append(out, properties(part.Value)...)
		}
	}
	return out
}

// jsonFields are the names encoding/json gives the fields of struct type
// t (pointers followed, embedded structs flattened).
func jsonFields(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case f.Anonymous && name == "":
			out = append(out, jsonFields(f.Type)...)
		case name == "":
			out = append(out, f.Name)
		default:
			out = append(out, name)
		}
	}
	return out
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
