package script

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// libVersion is folded into the library's name: a change to how the
// library is composed (not only to a script) gets a new name.
const libVersion = "cp-functions-1"

// perCall marks, in a prelude, a statement that resets one of its
// module-level mutable locals: "--@per-call clock_now = nil". Under EVAL
// every call is a fresh chunk; in a function library the preludes' locals
// live as long as the library, so every function runs the group's
// per-call statements first.
var perCall = regexp.MustCompile(`(?m)^--@per-call (.+)$`)

// topLocal is a prelude's module-level local that is not a function.
var topLocal = regexp.MustCompile(`(?m)^local ([a-zA-Z_][a-zA-Z0-9_]*)(?:\s*=\s*(.*))?$`)

// auditPrelude returns an error when prelude p declares a module-level
// local that looks mutable (no initial value, or nil, false or true)
// without a --@per-call statement that assigns it: such a local would
// carry a value from one FCALL into the next. Tables, numbers and strings
// are the preludes' constants and must never be written by a script.
func auditPrelude(p string) error {
	reset := map[string]bool{}
	for _, m := range perCall.FindAllStringSubmatch(p, -1) {
		name, _, _ := strings.Cut(strings.TrimSpace(m[1]), "=")
		reset[strings.TrimSpace(name)] = true
	}
	for _, m := range topLocal.FindAllStringSubmatch(p, -1) {
		if m[1] == "function" {
			continue
		}
		v := strings.TrimSpace(m[2])
		if i := strings.Index(v, "--"); i >= 0 {
			v = strings.TrimSpace(v[:i])
		}
		mutable := v == "" || v == "nil" || v == "false" || v == "true"
		if mutable && !reset[m[1]] {
			return fmt.Errorf("prelude local %q is mutable but has no --@per-call reset", m[1])
		}
	}
	return nil
}

// readOnly are the commands a no-writes function may call (none of them
// writes nor replicates).
var readOnly = map[string]bool{
	"GET": true, "MGET": true, "STRLEN": true, "EXISTS": true, "TYPE": true, "TTL": true, "PTTL": true, "TIME": true,
	"HGET": true, "HMGET": true, "HGETALL": true, "HEXISTS": true, "HLEN": true, "HKEYS": true, "HVALS": true,
	"ZSCORE": true, "ZRANGE": true, "ZRANGEBYSCORE": true, "ZREVRANGE": true, "ZREVRANGEBYSCORE": true,
	"ZCOUNT": true, "ZCARD": true, "ZRANK": true, "ZREVRANK": true, "ZMSCORE": true,
	"SCARD": true, "SMEMBERS": true, "SISMEMBER": true, "LRANGE": true, "LLEN": true, "LINDEX": true,
}

var (
	callRe    = regexp.MustCompile(`redis\.p?call\(\s*(?:'([A-Za-z]+)'|"([A-Za-z]+)"|)`)
	localFnRe = regexp.MustCompile(`(?m)^local function ([a-zA-Z_][a-zA-Z0-9_]*)\(`)
	identRe   = regexp.MustCompile(`[a-zA-Z_][a-zA-Z0-9_]*`)
	// luaComment is a Lua line comment (the store's scripts have no '--'
	// inside strings; a string cut short only adds identifiers, which can
	// only make mayWrite say yes).
	luaComment = regexp.MustCompile(`--[^\n]*`)
)

// writes reports whether Lua text t may call a command outside readOnly
// directly: a literal write, or a command named by an expression.
func writes(t string) bool {
	for _, m := range callRe.FindAllStringSubmatch(t, -1) {
		c := strings.ToUpper(m[1] + m[2])
		if c == "" || !readOnly[c] {
			return true
		}
	}
	return false
}

// mayWrite reports whether a script whose body is body, composed with
// preludes, may write: the body calls a write command, or calls a
// prelude function that may (the prelude's module-level functions, a
// block each up to the next one, and the ones they call). Unsure is yes:
// the flag no-writes is given only to a script shown read-only.
func mayWrite(body string, preludes []string) bool {
	return scanPreludes(preludes).mayWrite(body)
}

// preludeScan is what mayWrite needs of a set of preludes, computed once
// per set: their module-level functions, a block each, and whether each
// may write (memo; filled as scripts ask). Not safe for concurrent use.
type preludeScan struct {
	blocks map[string]string
	memo   map[string]int // 1 visiting or no, 2 yes
}

// scanPreludes splits preludes into their module-level functions.
func scanPreludes(preludes []string) *preludeScan {
	ps := &preludeScan{blocks: map[string]string{}, memo: map[string]int{}}
	for _, p := range preludes {
		p = luaComment.ReplaceAllString(p, "")
		idx := localFnRe.FindAllStringSubmatchIndex(p, -1)
		for i, m := range idx {
			end := len(p)
			if i+1 < len(idx) {
				end = idx[i+1][0]
			}
			ps.blocks[p[m[2]:m[3]]] = p[m[0]:end]
		}
		// A prelude's top-level code outside functions runs at load, not
		// per call; a write there is impossible (no redis.call at load).
	}
	return ps
}

// fnWrites reports whether the prelude function name may write.
func (ps *preludeScan) fnWrites(name string) bool {
	if v, ok := ps.memo[name]; ok {
		return v == 2
	}
	ps.memo[name] = 1
	b := ps.blocks[name]
	w := writes(b)
	for _, id := range identRe.FindAllString(b, -1) {
		if w {
			break
		}
		if _, ok := ps.blocks[id]; ok && id != name {
			w = ps.fnWrites(id)
		}
	}
	if w {
		ps.memo[name] = 2
	}
	return w
}

// mayWrite is mayWrite of body composed with ps's preludes.
func (ps *preludeScan) mayWrite(body string) bool {
	body = luaComment.ReplaceAllString(body, "")
	if writes(body) {
		return true
	}
	for _, id := range identRe.FindAllString(body, -1) {
		if _, ok := ps.blocks[id]; ok && ps.fnWrites(id) {
			return true
		}
	}
	return false
}

// entry is one registered script: what its function in the library is
// made of.
type entry struct {
	name     string // the script's name
	sha      string // its EVAL source's SHA-1
	reader   string // the generated K/A reader
	preludes []string
	body     string
	ro       bool // no-writes
}

// library is the function library of a Functions' scripts: its Lua text,
// its name, and each script's function name by the script's SHA-1 (boxed
// once, for the FCALL argument list).
type library struct {
	name  string
	text  string
	names map[string]any
	ping  string
}

// build composes the library of entries: its name is cp_ and 12 hex digits
// of the SHA-1 of its text (and libVersion), so it names its sources; scripts with the
// same preludes share one do … end block in which the preludes are
// defined once, and each is a function cp_<lib>_<script>_<8 hex of its
// SHA-1> whose callback runs the block's per-call resets, then the
// script's reader and body, with KEYS and ARGV its parameters. Every
// function has the flag allow-cross-slot-keys (an EVAL without a shebang
// may touch keys of several slots; the store's scripts keep to one, but
// the functions are not made stricter than the EVAL path) and, when
// mayWrite shows it reads only, no-writes (so it runs under maxmemory,
// where a function that may write is refused, as EVAL runs it).
func build(entries map[string]*entry) *library {
	shas := make([]string, 0, len(entries))
	for sha := range entries {
		shas = append(shas, sha)
	}
	slices.Sort(shas)
	// The text is composed with a placeholder for the name, which is then
	// the hash of the text: any change to a script, a prelude, a flag or the
	// composition is a new library.
	const name = "\x00lib\x00"
	groups := map[string][]*entry{}
	var keys []string
	for _, sha := range shas {
		e := entries[sha]
		k := strings.Join(e.preludes, "\x00")
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], e)
	}
	l := &library{name: name, names: make(map[string]any, len(entries)), ping: name + "_ping"}
	var b strings.Builder
	fmt.Fprintf(&b, "#!lua name=%s\n", name)
	for _, k := range keys {
		g := groups[k]
		b.WriteString("do\n")
		var resets []string
		for _, p := range g[0].preludes {
			b.WriteString(p)
			b.WriteString("\n")
			for _, m := range perCall.FindAllStringSubmatch(p, -1) {
				resets = append(resets, m[1])
			}
		}
		for _, e := range g {
			fn := fmt.Sprintf("%s_%s_%s", name, e.name, e.sha[:8])
			l.names[e.sha] = fn
			flags := "'allow-cross-slot-keys'"
			if e.ro {
				flags += ", 'no-writes'"
			}
			fmt.Fprintf(&b, "redis.register_function{function_name='%s', flags={%s}, callback=function(KEYS, ARGV)\n", fn, flags)
			for _, r := range resets {
				b.WriteString(r)
				b.WriteString("\n")
			}
			b.WriteString(e.reader)
			b.WriteString("\n")
			b.WriteString(e.body)
			b.WriteString("\nend}\n")
		}
		b.WriteString("end\n")
	}
	fmt.Fprintf(&b, "redis.register_function{function_name='%s', flags={'no-writes'}, callback=function() return 1 end}\n", l.ping)
	sum := sha1.Sum([]byte(libVersion + b.String()))
	l.name = "cp_" + hex.EncodeToString(sum[:])[:12]
	l.text = strings.ReplaceAll(b.String(), name, l.name)
	l.ping = l.name + "_ping"
	for sha, fn := range l.names {
		l.names[sha] = strings.Replace(fn.(string), name, l.name, 1)
	}
	return l
}
