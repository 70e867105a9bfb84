package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v3"
)

// maxColumns is the width a table fits by default (-o table); -o wide
// shows every column, uncut.
const maxColumns = 100

// column is one column of a table.
type column struct {
	name string
	// wide: shown only with -o wide.
	wide bool
	// max cuts a cell to max characters in -o table (its last one "…");
	// 0: never cut.
	max int
}

// wideCol is a column shown only with -o wide.
func wideCol(name string) column { return column{name: name, wide: true} }

// col is a column of both forms; max cuts it in -o table.
func col(name string, max int) column { return column{name: name, max: max} }

// table writes aligned columns (text/tabwriter) to w: a header row, then
// rows; empty cells print as "-". In -o table it leaves out the wide
// columns and cuts long cells, so that the tables of this program fit
// maxColumns with realistic values (TestTablesFit100Columns); -o wide
// shows every column in full.
type table struct {
	tw   *tabwriter.Writer
	cols []column
	wide bool
}

func newTable(w io.Writer, wide bool, cols ...column) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0), cols: cols, wide: wide}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	t.row(names...)
	return t
}

// row writes one row: a cell for every column, the wide ones included.
func (t *table) row(cells ...string) {
	out := make([]string, 0, len(cells))
	for i, c := range cells {
		var cl column
		if i < len(t.cols) {
			cl = t.cols[i]
		}
		if cl.wide && !t.wide {
			continue
		}
		if c == "" {
			c = "-"
		}
		c = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(c)
		if !t.wide && cl.max > 0 {
			c = cut(c, cl.max)
		}
		out = append(out, c)
	}
	fmt.Fprintln(t.tw, strings.Join(out, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// cut shortens s to at most n characters, its last one "…" when cut.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// writeJSON writes raw JSON indented, or v marshalled when raw is nil.
func writeJSON(w io.Writer, raw []byte, v any) error {
	if raw == nil {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return err
		}
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// ts formats a time for -o wide and for scripts: RFC 3339 in UTC, seconds
// precision; "" for none.
func ts(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// relWithin is how far from now a table cell shows a time relative to
// now; beyond it, the date and time.
const relWithin = 24 * time.Hour

// when formats a time for a table cell, to the second: relative to now
// within relWithin ("in 12s", "3m ago", "5h2m10s ago"), else "2006-01-02
// 15:04:05" in UTC; in -o wide always ts (RFC 3339). "" for none.
func (a *app) when(wide bool, t time.Time) string {
	switch {
	case t.IsZero():
		return ""
	case wide:
		return ts(t)
	}
	now := a.now()
	if d := t.Sub(now); d < relWithin && d > -relWithin {
		return rel(t, now)
	}
	return t.UTC().Format(time.DateTime)
}

// whenp is when of an optional time.
func (a *app) whenp(wide bool, t *time.Time) string {
	if t == nil {
		return ""
	}
	return a.when(wide, *t)
}

// stamp formats a time of a `get` field: ts and, within relWithin of now,
// how far ("2026-03-02T09:00:12Z (in 12s)"); "" for none.
func (a *app) stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	now := a.now()
	if d := t.Sub(now); d < relWithin && d > -relWithin {
		return ts(t) + " (" + rel(t, now) + ")"
	}
	return ts(t)
}

// stampp is stamp of an optional time.
func (a *app) stampp(t *time.Time) string {
	if t == nil {
		return ""
	}
	return a.stamp(*t)
}

// rel says how far t is from now, to the second: "in 12s", "3m ago",
// "in 1h0m5s", "now".
func rel(t, now time.Time) string {
	d := t.Sub(now).Round(time.Second)
	switch {
	case d > 0:
		return "in " + compact(d)
	case d < 0:
		return compact(-d) + " ago"
	}
	return "now"
}

// compact writes a whole-second duration d > 0 as hours, minutes and
// seconds without trailing zero units: 12s, 3m, 3m5s, 1h, 1h0m5s, 26h3m.
func compact(d time.Duration) string {
	h, m, sec := int64(d/time.Hour), int64(d%time.Hour/time.Minute), int64(d%time.Minute/time.Second)
	var b strings.Builder
	if h > 0 {
		fmt.Fprintf(&b, "%dh", h)
	}
	if m > 0 || (h > 0 && sec > 0) {
		fmt.Fprintf(&b, "%dm", m)
	}
	if sec > 0 || b.Len() == 0 {
		fmt.Fprintf(&b, "%ds", sec)
	}
	return b.String()
}

// status formats an upstream status; 0 (no response) as "none".
func status(n int) string {
	if n == 0 {
		return "none"
	}
	return strconv.Itoa(n)
}

// statusList formats status codes as "503, 0 (none)": numbers, not a Go
// slice ("[503 0]").
func statusList(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
		if n == 0 {
			parts[i] += " (none)"
		}
	}
	return strings.Join(parts, ", ")
}

// outputMode reads -o: table, wide or json; anything else is a usage
// error.
func outputMode(c *cli.Command) (string, error) {
	switch o := c.String("output"); o {
	case "json", "wide":
		return o, nil
	case "table", "":
		return "table", nil
	default:
		return "", usagef("-o %q: use table, wide or json", o)
	}
}

// parseTime reads a --since/--until value: RFC 3339, a date (midnight
// UTC), or a duration before now (Go syntax, plus "d" for days: 7d, 36h).
func parseTime(flag, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(v, "d"); ok {
		if n, err := strconv.ParseFloat(days, 64); err == nil && n >= 0 {
			return now.Add(-time.Duration(n * 24 * float64(time.Hour))), nil
		}
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usagef("--%s %q: use RFC 3339 (2025-01-31T14:00:00Z), a date (2025-01-31) or a duration ago (90m, 36h, 7d)", flag, v)
}
