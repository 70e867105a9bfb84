// Package srctest reads Go source for the tests that hold a document or a
// list to the code's own words (docs/openapi/problem.yaml to the problem
// codes, docs/tracing.md to the classification reasons): so that a word
// added to the code is known to its check without a second list to keep.
// It is imported by tests only.
package srctest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"
)

// Const is a constant declared with a string literal: its name, the name
// of its declared type ("" for an untyped constant) and its value,
// unquoted.
type Const struct {
	Name, Type, Value string
}

// StringConsts returns the string-literal constants of the Go file at
// path (relative to the test's package directory), in the order the file
// declares them. It fails t when the file does not parse.
func StringConsts(t testing.TB, path string) []Const {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []Const
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			typ := ""
			if id, ok := vs.Type.(*ast.Ident); ok {
				typ = id.Name
			}
			for i, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING || i >= len(vs.Names) {
					continue
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatalf("%s: constant %s: %v", path, vs.Names[i].Name, err)
				}
				out = append(out, Const{Name: vs.Names[i].Name, Type: typ, Value: s})
			}
		}
	}
	return out
}
