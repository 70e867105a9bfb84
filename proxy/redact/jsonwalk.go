package redact

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// walker scans a valid JSON body (RFC 8259), descending only where a
// configured path may still match, and records the spans of matched values.
// It relies on the body being valid: json.Valid checked it, so it never
// meets a byte the grammar does not allow and never runs off the end.
type walker struct {
	body  []byte
	paths [][]string
	spans []span
}

// value walks the value that starts at i or after whitespace, pos object
// keys deep, and returns the index just past it. live lists the paths whose
// first pos segments are the keys walked to get here.
func (w *walker) value(i, pos int, live []int) int {
	i = w.space(i)
	if len(live) == 0 {
		return w.skip(i)
	}
	if slices.ContainsFunc(live, func(p int) bool { return len(w.paths[p]) == pos }) {
		end := w.skip(i)
		w.spans = append(w.spans, span{start: i, end: end})
		return end
	}
	switch w.body[i] {
	case '{':
		return w.object(i+1, pos, live)
	case '[':
		return w.array(i+1, pos, live)
	}
	return w.skip(i) // a scalar where the paths wanted an object: nothing to mask
}

// array walks the elements of an array whose '[' ends before i and returns
// the index past its ']'. Arrays are transparent: elements keep pos.
func (w *walker) array(i, pos int, live []int) int {
	if i = w.space(i); w.body[i] == ']' {
		return i + 1
	}
	for {
		i = w.space(w.value(i, pos, live))
		if w.body[i] == ']' {
			return i + 1
		}
		i++ // ','
	}
}

// object walks the members of an object whose '{' ends before i and returns
// the index past its '}'. Every live path is longer than pos here.
func (w *walker) object(i, pos int, live []int) int {
	if i = w.space(i); w.body[i] == '}' {
		return i + 1
	}
	next := make([]int, 0, len(live))
	for {
		i = w.space(i)
		end := w.str(i)
		key := keyBytes(w.body[i:end])
		next = next[:0]
		for _, p := range live {
			if w.paths[p][pos] == string(key) {
				next = append(next, p)
			}
		}
		colon := w.space(end)
		i = w.space(w.value(colon+1, pos+1, next))
		if w.body[i] == '}' {
			return i + 1
		}
		i++ // ','
	}
}

// keyBytes returns an object key's value from its quoted form: the bytes
// between the quotes when they hold no escape and are valid UTF-8, else what
// encoding/json makes of them (escapes decoded, invalid UTF-8 as U+FFFD), so
// keys compare as json.Unmarshal sees them.
func keyBytes(quoted []byte) []byte {
	inner := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return inner
	}
	var key string
	if json.Unmarshal(quoted, &key) != nil {
		return inner // not reached: the body is valid
	}
	return []byte(key)
}

// skip returns the index just past the value starting at i.
func (w *walker) skip(i int) int {
	switch w.body[i] {
	case '"':
		return w.str(i)
	case '{', '[':
		depth := 0
		for j := i; ; j++ {
			switch w.body[j] {
			case '"':
				j = w.str(j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
	}
	j := i // number, true, false or null: up to the next delimiter
	for j < len(w.body) && !isDelim(w.body[j]) {
		j++
	}
	return j
}

// str returns the index just past the string whose opening quote is at i.
func (w *walker) str(i int) int {
	for j := i + 1; ; j++ {
		switch w.body[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
}

// space returns the first index at or after i that is not JSON whitespace,
// or len(body).
func (w *walker) space(i int) int {
	for i < len(w.body) && isJSONSpace(w.body[i]) {
		i++
	}
	return i
}

// isJSONSpace reports whether b is JSON whitespace (RFC 8259 §2).
func isJSONSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\r' || b == '\n' }

// isDelim reports whether b ends a number or a literal in valid JSON.
func isDelim(b byte) bool { return b == ',' || b == '}' || b == ']' || isJSONSpace(b) }
