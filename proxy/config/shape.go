package config

import (
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
)

// walk checks the YAML tree n against the Go type t before anything is
// decoded, so that every shape problem is reported at once with its key path
// and line (the decoder stops at the first). It records the line of every
// key in c.lines, reports unknown keys, wrong kinds (a list where a mapping
// belongs, ...) and durations that are not Go duration strings, and it
// replaces a plain scalar in a string field by its source text, so that
// `api_version: 68.0` reads "68.0" and `owner: 005000000000001` keeps its
// zeros (YAML would make them the numbers 68 and 5000000000001).
//
// It returns the node to keep in place of n. A key whose value has the
// wrong shape (and an unknown key) is recorded in c.bad and dropped from
// its mapping, so the rest still decodes and is validated in the same pass
// (Parse reports every problem at once); the checks of later steps skip
// the keys the shape check already reported (collector.related). Aliases
// and tagged nodes are left to the decoder unchecked; anchors are checked
// where they are defined.
func (c *collector) walk(n ast.Node, t reflect.Type, path string) ast.Node {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch v := n.(type) {
	case nil, *ast.NullNode, *ast.AliasNode, *ast.TagNode:
		return n
	case *ast.AnchorNode:
		v.Value = c.walk(v.Value, t, path)
		return n
	}
	switch {
	case t == reflect.TypeFor[time.Duration]():
		c.checkDuration(n, path)
	case t.Kind() == reflect.Struct:
		return c.walkStruct(n, t, path)
	case t.Kind() == reflect.Map:
		return c.walkMap(n, t, path)
	case t.Kind() == reflect.Slice:
		c.walkSlice(n, t, path)
	case t.Kind() == reflect.String:
		return c.stringNode(n, path)
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		c.checkInt(n, t, path)
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		switch n.(type) {
		case *ast.IntegerNode, *ast.FloatNode:
		default:
			c.shape(line(n), path, "must be a number")
		}
	case t.Kind() == reflect.Bool:
		if _, ok := n.(*ast.BoolNode); !ok {
			c.shape(line(n), path, "must be true or false")
		}
	}
	return n
}

// walkStruct checks a mapping against a struct's yaml-tagged fields and
// returns it without the pairs it reported.
func (c *collector) walkStruct(n ast.Node, t reflect.Type, path string) ast.Node {
	pairs, ok := mappingPairs(n)
	if !ok {
		if t == reflect.TypeFor[SecretRef]() {
			c.shape(line(n), path, "must be {env: VARIABLE} or {file: PATH}; secrets are never written inline")
			return n
		}
		c.shape(line(n), path, "must be a mapping")
		return n
	}
	fields := yamlFields(t)
	var keep []*ast.MappingValueNode
	for _, kv := range pairs {
		if kv.Key.IsMergeKey() {
			c.walk(kv.Value, t, path) // `<<: {...}` merges keys into this mapping
			keep = append(keep, kv)
			continue
		}
		name, ok := keyName(kv.Key)
		key := join(path, name)
		if !ok {
			c.at(line(kv.Key), path, "keys must be plain strings")
			continue
		}
		c.lines[key] = line(kv.Key)
		ft, known := fields[name]
		if !known {
			c.at(line(kv.Key), key, "unknown key%s", suggest(name, fields)) // dropped; nothing stands in for it
			continue
		}
		if kv.Value = c.walk(kv.Value, ft, key); !c.bad[key] {
			keep = append(keep, kv)
		}
	}
	return keepPairs(n, pairs, keep)
}

// walkMap checks a mapping whose keys are names (endpoints, headers) and
// returns it without the pairs it reported.
func (c *collector) walkMap(n ast.Node, t reflect.Type, path string) ast.Node {
	pairs, ok := mappingPairs(n)
	if !ok {
		c.shape(line(n), path, "must be a mapping")
		return n
	}
	var keep []*ast.MappingValueNode
	for _, kv := range pairs {
		name, ok := keyName(kv.Key)
		if !ok || kv.Key.IsMergeKey() {
			c.at(line(kv.Key), path, "keys must be plain strings")
			continue
		}
		key := join(path, name)
		c.lines[key] = line(kv.Key)
		if kv.Value = c.walk(kv.Value, t.Elem(), key); !c.bad[key] {
			keep = append(keep, kv)
		}
	}
	return keepPairs(n, pairs, keep)
}

// keepPairs is mapping n with only the pairs keep of its pairs: n itself
// when none was dropped, else a mapping of keep (an empty one decodes
// onto the defaults).
func keepPairs(n ast.Node, pairs, keep []*ast.MappingValueNode) ast.Node {
	if len(keep) == len(pairs) {
		return n
	}
	if m, ok := n.(*ast.MappingNode); ok {
		m.Values = keep
		return m
	}
	return ast.Mapping(n.GetToken(), false, keep...)
}

// walkSlice checks a sequence and each of its items.
func (c *collector) walkSlice(n ast.Node, t reflect.Type, path string) {
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		c.shape(line(n), path, "must be a list")
		return
	}
	for i, item := range seq.Values {
		key := index(path, i)
		c.lines[key] = line(item)
		seq.Values[i] = c.walk(item, t.Elem(), key)
		if c.bad[key] {
			c.bad[path] = true // the list is dropped whole: its indexes stay those of the file
		}
	}
}

// checkInt accepts an integer that fits t. Numbers are not secrets, so an
// out-of-range one is quoted back.
func (c *collector) checkInt(n ast.Node, t reflect.Type, path string) {
	text := n.GetToken().Value
	v, ok := n.(*ast.IntegerNode)
	if !ok {
		if text != "" && strings.Trim(text, "0123456789") == "" {
			c.shape(line(n), path, "%s is out of range", text) // too long for the parser's int64/uint64
			return
		}
		c.shape(line(n), path, "must be a whole number")
		return
	}
	zero := reflect.Zero(t)
	signed := t.Kind() <= reflect.Int64
	var over bool
	switch x := v.Value.(type) {
	case int64:
		over = (signed && zero.OverflowInt(x)) || (!signed && (x < 0 || zero.OverflowUint(uint64(x))))
	case uint64:
		over = (signed && (x > math.MaxInt64 || zero.OverflowInt(int64(x)))) || (!signed && zero.OverflowUint(x))
	}
	if over {
		c.shape(line(n), path, "%s is out of range", text)
	}
}

// checkDuration accepts only Go duration strings (time.ParseDuration).
// Durations are not secrets, so the bad value is quoted back.
func (c *collector) checkDuration(n ast.Node, path string) {
	const hint = "write a Go duration such as 500ms, 5s, 15m or 72h"
	switch v := n.(type) {
	case *ast.StringNode:
		if _, err := time.ParseDuration(v.Value); err != nil {
			c.shape(line(n), path, "%q is not a duration; %s", v.Value, hint)
		}
	case *ast.IntegerNode, *ast.FloatNode:
		c.shape(line(n), path, "%s has no unit; %s", n.GetToken().Value, hint)
	default:
		c.shape(line(n), path, "must be a duration; %s", hint)
	}
}

// stringNode keeps string and block-literal nodes and turns other scalars
// into strings holding their source text. The value is never quoted back
// in an error: a string field may hold something sensitive.
func (c *collector) stringNode(n ast.Node, path string) ast.Node {
	switch n.(type) {
	case *ast.StringNode, *ast.LiteralNode:
		return n
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return ast.String(n.GetToken())
	}
	c.shape(line(n), path, "must be a string")
	return n
}

// mappingPairs returns a mapping's entries; the parser represents a
// one-entry block mapping as a bare MappingValueNode.
func mappingPairs(n ast.Node) ([]*ast.MappingValueNode, bool) {
	switch v := n.(type) {
	case *ast.MappingNode:
		return v.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{v}, true
	}
	return nil, false
}

// keyName returns a scalar key's text.
func keyName(k ast.MapKeyNode) (string, bool) {
	switch v := k.(type) {
	case *ast.StringNode:
		return v.Value, true
	case ast.ScalarNode:
		return k.GetToken().Value, true
	}
	return "", false
}

// yamlFields maps a struct's yaml keys to their field types, skipping
// fields tagged "-" and untagged ones.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		out[name] = f.Type
	}
	return out
}

func line(n ast.Node) int {
	if n == nil || n.GetToken() == nil {
		return 0
	}
	return n.GetToken().Position.Line
}

// suggest returns `; did you mean "x"?` for the known key closest to name
// when it is at most two edits away, else "".
func suggest(name string, fields map[string]reflect.Type) string {
	best, bestDist := "", 3
	for k := range fields {
		if d := editDistance(name, k); d < bestDist || (d == bestDist && k < best) {
			best, bestDist = k, d
		}
	}
	if best == "" {
		return ""
	}
	return "; did you mean \"" + best + "\"?"
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
