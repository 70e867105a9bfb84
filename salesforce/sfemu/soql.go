package sfemu

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The SOQL subset the emulator runs:
//
//	SELECT field, … FROM Object
//	  [WHERE cond [AND cond]…]
//	  [ORDER BY field [ASC|DESC]]
//	  [LIMIT n]
//
// where cond is `field op value` (op one of = != < <= > >=) or
// `field IN (value, …)`, and a value is a quoted string ('…', with
// backslash escapes), a dateTime literal (2024-05-01T10:00:00Z), a number,
// true, false or null. Anything else is refused with MALFORMED_QUERY.

// soqlQuery is a parsed statement.
type soqlQuery struct {
	fields []string
	object string
	conds  []cond
	order  string
	desc   bool
	limit  int
}

type cond struct {
	field string
	op    string
	vals  []any // one value, or the IN list; nil for null
}

// lexSOQL splits a statement into tokens: words, quoted strings (kept with
// their quote, escapes resolved), and punctuation.
func lexSOQL(q string) ([]string, error) {
	var out []string
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == ',' || c == '(' || c == ')':
			out = append(out, string(c))
			i++
		case c == '=' || c == '<' || c == '>' || c == '!':
			j := i + 1
			if j < len(q) && q[j] == '=' {
				j++
			}
			out = append(out, q[i:j])
			i = j
		case c == '\'':
			var b strings.Builder
			b.WriteByte('\'')
			j := i + 1
			for ; j < len(q) && q[j] != '\''; j++ {
				if q[j] == '\\' && j+1 < len(q) {
					j++
				}
				b.WriteByte(q[j])
			}
			if j >= len(q) {
				return nil, fmt.Errorf("unterminated string")
			}
			out = append(out, b.String())
			i = j + 1
		default:
			j := i
			for j < len(q) && !strings.ContainsRune(" \t\n\r,()=<>!'", rune(q[j])) {
				j++
			}
			out = append(out, q[i:j])
			i = j
		}
	}
	return out, nil
}

// parser walks the tokens.
type parser struct {
	toks []string
	pos  int
}

func (p *parser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *parser) next() string { t := p.peek(); p.pos++; return t }

func (p *parser) keyword(k string) bool {
	if strings.EqualFold(p.peek(), k) {
		p.pos++
		return true
	}
	return false
}

// parseSOQL parses a statement of the subset.
func parseSOQL(q string) (*soqlQuery, error) {
	toks, err := lexSOQL(q)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	if !p.keyword("SELECT") {
		return nil, fmt.Errorf("expected SELECT")
	}
	out := &soqlQuery{}
	for {
		out.fields = append(out.fields, p.next())
		if p.peek() != "," {
			break
		}
		p.next()
	}
	if !p.keyword("FROM") {
		return nil, fmt.Errorf("expected FROM")
	}
	out.object = p.next()
	if p.keyword("WHERE") {
		for {
			c, err := p.cond()
			if err != nil {
				return nil, err
			}
			out.conds = append(out.conds, c)
			if !p.keyword("AND") {
				break
			}
		}
	}
	if p.keyword("ORDER") {
		if !p.keyword("BY") {
			return nil, fmt.Errorf("expected BY")
		}
		out.order = p.next()
		out.desc = p.keyword("DESC")
		p.keyword("ASC")
	}
	if p.keyword("LIMIT") {
		if out.limit, err = strconv.Atoi(p.next()); err != nil {
			return nil, fmt.Errorf("bad LIMIT")
		}
	}
	if p.pos != len(toks) {
		return nil, fmt.Errorf("unexpected token %q", p.peek())
	}
	return out, nil
}

func (p *parser) cond() (cond, error) {
	c := cond{field: p.next()}
	if p.keyword("IN") {
		c.op = "IN"
		if p.next() != "(" {
			return c, fmt.Errorf("expected (")
		}
		for {
			c.vals = append(c.vals, literal(p.next()))
			if t := p.next(); t == ")" {
				return c, nil
			} else if t != "," {
				return c, fmt.Errorf("expected , or )")
			}
		}
	}
	switch op := p.next(); op {
	case "=", "!=", "<", "<=", ">", ">=":
		c.op = op
	default:
		return c, fmt.Errorf("unsupported operator %q", op)
	}
	c.vals = []any{literal(p.next())}
	return c, nil
}

// literal turns a value token into a comparable value: a string, a
// time.Time, a float64, a bool or nil.
func literal(tok string) any {
	if s, ok := strings.CutPrefix(tok, "'"); ok {
		return s
	}
	switch strings.ToLower(tok) {
	case "null":
		return nil
	case "true":
		return true
	case "false":
		return false
	}
	if t, err := time.Parse(time.RFC3339Nano, tok); err == nil {
		return t
	}
	if f, err := strconv.ParseFloat(tok, 64); err == nil {
		return f
	}
	return tok
}

// compare orders a stored value against a literal: -1, 0, 1, or false
// when they cannot be compared. A stored dateTime string compares as a
// time with a time literal.
func compare(stored, lit any) (int, bool) {
	switch l := lit.(type) {
	case nil:
		if stored == nil {
			return 0, true
		}
		return 1, true
	case time.Time:
		s, ok := stored.(string)
		t, err := time.Parse(time.RFC3339Nano, s)
		if !ok || err != nil {
			return 0, false
		}
		return t.Compare(l), true
	case float64:
		f, ok := stored.(float64)
		if !ok {
			return 0, false
		}
		return cmpOrdered(f, l), true
	case bool:
		b, ok := stored.(bool)
		return map[bool]int{true: 0, false: 1}[ok && b == l], ok
	case string:
		s, ok := stored.(string)
		if !ok {
			return 0, false
		}
		return strings.Compare(s, l), true
	}
	return 0, false
}

func cmpOrdered(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// matches reports whether rec satisfies every condition.
func (q *soqlQuery) matches(rec Record) bool {
	for _, c := range q.conds {
		v := rec[c.field]
		if c.op == "IN" {
			if !slices.ContainsFunc(c.vals, func(l any) bool { n, ok := compare(v, l); return ok && n == 0 }) {
				return false
			}
			continue
		}
		n, ok := compare(v, c.vals[0])
		if !ok {
			return false
		}
		if !map[string]bool{"=": n == 0, "!=": n != 0, "<": n < 0, "<=": n <= 0, ">": n > 0, ">=": n >= 0}[c.op] {
			return false
		}
	}
	return true
}

// run selects, orders and limits records, returning the selected fields
// of each (missing ones as null) with their attributes.
func (q *soqlQuery) run(records []Record, version string) []Record {
	var hits []Record
	for _, r := range records {
		if q.matches(r) {
			hits = append(hits, r)
		}
	}
	if q.order != "" {
		slices.SortStableFunc(hits, func(a, b Record) int {
			n, _ := compare(a[q.order], asLiteral(b[q.order]))
			if q.desc {
				return -n
			}
			return n
		})
	}
	if q.limit > 0 && len(hits) > q.limit {
		hits = hits[:q.limit]
	}
	out := make([]Record, len(hits))
	for i, r := range hits {
		row := Record{"attributes": map[string]any{"type": q.object,
			"url": fmt.Sprintf("/services/data/%s/sobjects/%s/%v", version, q.object, r["Id"])}}
		for _, f := range q.fields {
			row[f] = r[f]
		}
		out[i] = row
	}
	return out
}

// asLiteral turns a stored value into the literal it compares as: a
// dateTime string as a time, anything else as it is.
func asLiteral(v any) any {
	if s, ok := v.(string); ok {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return t
		}
	}
	return v
}
