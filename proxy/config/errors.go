package config

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ErrInvalid matches every configuration error: errors.Is(err, ErrInvalid)
// is true for any error Load, Parse or Config.Prepare return, so the binary
// can tell "fix the file" (exit status 2) from other failures.
var ErrInvalid = errors.New("invalid configuration")

// Error is one problem with the configuration. Load, Parse and Prepare
// return every problem they find at once, joined with errors.Join (one per
// line of the joined message), so an operator fixes them in one go; use
// errors.As to get the first, or errors.Is(err, ErrInvalid) to test.
//
// An Error never contains a secret value: it names the key, the environment
// variable or the file, never what they hold.
type Error struct {
	// File is the configuration file's path (set by Load; empty from Parse).
	File string
	// Line is the 1-based line in the file the problem is on, or 0 when the
	// key is absent from the file and none of its parents is present.
	Line int
	// Key is the key's path: dot-separated map keys and [i] list indexes,
	// e.g. endpoints.payment-api.allowed_networks[1]. Empty for problems of
	// the file as a whole (a YAML syntax error, for instance).
	Key string
	// Msg says what is wrong and, where it helps, what is expected.
	Msg string
}

// Error renders "file:line: key: msg", leaving out the parts not known:
// "line 3: key: msg" without a file, "key: msg" without a line.
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		b.WriteString(e.File + ":" + strconv.Itoa(e.Line) + ": ")
	case e.File != "":
		b.WriteString(e.File + ": ")
	case e.Line > 0:
		b.WriteString("line " + strconv.Itoa(e.Line) + ": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Problems is every *Error in err, which Load, Parse and Prepare join
// (errors.Join), in order; nil when there is none.
func Problems(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *Error:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return out
}

// collector gathers the problems of one Load, Parse or Prepare. It knows the
// line of every key seen in the file (lines, filled by the shape walk) so a
// problem found later, on the decoded value, still points at its line.
type collector struct {
	file  string
	lines map[string]int
	errs  []error
	// bad are the keys the shape check reported (shape): their values were
	// dropped before decoding, so the later steps' problems of these keys,
	// of keys under them and of their parents are not reported (related):
	// they would be about the default left in the dropped value's place.
	bad map[string]bool
	// decoded is set once the file is decoded: the later steps run.
	decoded bool
}

func newCollector(file string) *collector {
	return &collector{file: file, lines: map[string]int{}, bad: map[string]bool{}}
}

// at records a problem on an explicit line, unless a later step's problem
// is about a key the shape check already reported (related).
func (c *collector) at(line int, key, format string, args ...any) {
	if c.decoded && c.related(key) {
		return
	}
	c.errs = append(c.errs, &Error{File: c.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// shape records a problem of the shape check on key, whose value is then
// dropped (walk).
func (c *collector) shape(line int, key, format string, args ...any) {
	c.bad[key] = true
	c.at(line, key, format, args...)
}

// related reports whether key is a key the shape check reported, lies
// under one, or is the parent of one (not the file itself, key "").
func (c *collector) related(key string) bool {
	if key == "" {
		return false
	}
	under := func(k, parent string) bool {
		return strings.HasPrefix(k, parent+".") || strings.HasPrefix(k, parent+"[")
	}
	for b := range c.bad {
		if b == key || under(key, b) || under(b, key) {
			return true
		}
	}
	return false
}

// add records a problem with key, on the line of the key or, when the key
// is absent from the file, of its nearest present parent.
func (c *collector) add(key, format string, args ...any) {
	c.at(c.lineOf(key), key, format, args...)
}

func (c *collector) lineOf(key string) int {
	for key != "" {
		if l, ok := c.lines[key]; ok {
			return l
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			return 0
		}
		key = key[:i]
	}
	return 0
}

// failed reports whether any problem has been recorded.
func (c *collector) failed() bool { return len(c.errs) > 0 }

// err joins the problems in file order (by line, problems without a line
// last, otherwise in the order found), nil when there are none.
func (c *collector) err() error {
	slices.SortStableFunc(c.errs, func(a, b error) int {
		return cmp.Compare(sortLine(a), sortLine(b))
	})
	return errors.Join(c.errs...)
}

func sortLine(err error) int {
	if e, ok := err.(*Error); ok && e.Line > 0 {
		return e.Line
	}
	return math.MaxInt
}

// join builds a child key path: join("", "auth") is "auth",
// join("auth", "issuers") is "auth.issuers".
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// index builds a list item's key path: index("auth.issuers", 1) is
// "auth.issuers[1]".
func index(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}
