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

// ts formats a time for a table: RFC 3339 in UTC, seconds precision; ""
// for none.
func ts(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// tsShort formats a time for a 100-column table: "2006-01-02 15:04" in
// UTC (-o wide shows ts); "" for none.
func tsShort(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04")
}

// tsp is ts of an optional time.
func tsp(t *time.Time) string {
	if t == nil {
		return ""
	}
	return ts(*t)
}

// tsFor is ts in -o wide, tsShort otherwise.
func tsFor(wide bool, t time.Time) string {
	if wide {
		return ts(t)
	}
	return tsShort(t)
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

// until says how far t is from now as a duration rounded to the second
// ("in 4m10s", "2m ago"), for a warning.
func until(t, now time.Time) string {
	d := t.Sub(now).Round(time.Second)
	switch {
	case d > 0:
		return "in " + d.String()
	case d < 0:
		return (-d).String() + " ago"
	}
	return "now"
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
