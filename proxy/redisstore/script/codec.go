package script

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// kind is how one field travels: as a scalar, a list of strings, or a list
// of elements that are structs.
type kind int

const (
	scalar kind = iota
	list
	structs
)

// field is one tagged field of an argument or reply struct.
type field struct {
	name  string // the Lua name
	index int    // the Go field index
	key   bool   // a KEYS field (arguments only)
	kind  kind
	typ   reflect.Type // the scalar's type, or the slice's element type
	elem  []field      // a slice of structs' element fields
	codec *replyCodec  // a reply's structs field: elem's decoder, built once
}

// luaName is the form of a field's Lua name: a Lua identifier.
var luaName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

var durationType = reflect.TypeFor[time.Duration]()

// fieldsOf reads the tagged fields of struct t; nested allows one level of
// slices of structs inside it.
func fieldsOf(t reflect.Type, nested bool) ([]field, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%s is not a struct", t)
	}
	var fs []field
	seen := map[string]bool{}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, ok := sf.Tag.Lookup("lua")
		if !ok || tag == "-" {
			continue
		}
		name, opt, _ := strings.Cut(tag, ",")
		if !luaName.MatchString(name) {
			return nil, fmt.Errorf("field %s: %q is not a Lua name", sf.Name, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("field %s: name %q used twice", sf.Name, name)
		}
		seen[name] = true
		f := field{name: name, index: i, key: opt == "key"}
		if opt != "" && opt != "key" {
			return nil, fmt.Errorf("field %s: unknown tag option %q", sf.Name, opt)
		}
		ft := sf.Type
		switch {
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.String:
			f.kind, f.typ = list, ft.Elem()
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			if !nested {
				return nil, fmt.Errorf("field %s: slices of structs nest one level only", sf.Name)
			}
			el, err := fieldsOf(ft.Elem(), false)
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", sf.Name, err)
			}
			f.kind, f.typ, f.elem = structs, ft.Elem(), el
		case scalarType(ft):
			f.kind, f.typ = scalar, ft
		case ft.Kind() == reflect.Struct && nested:
			// Replies only (argCodecOf refuses it): one nested table.
			el, err := fieldsOf(ft, false)
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", sf.Name, err)
			}
			f.kind, f.typ, f.elem = structs, ft, el
		default:
			return nil, fmt.Errorf("field %s: type %s is not supported", sf.Name, ft)
		}
		if f.key && !(f.kind == list || (f.kind == scalar && ft.Kind() == reflect.String)) {
			return nil, fmt.Errorf("field %s: a key is a string or []string", sf.Name)
		}
		fs = append(fs, f)
	}
	return fs, nil
}

// scalarType reports whether t travels as one Lua value.
func scalarType(t reflect.Type) bool {
	if t == reflect.TypeFor[[]byte]() {
		return true
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// argCodec encodes one argument struct type into KEYS and ARGV and holds
// the Lua that reads them back into K and A.
type argCodec struct {
	fields []field
	lua    string
}

func argCodecOf(t reflect.Type) (*argCodec, error) {
	fs, err := fieldsOf(t, true)
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		if f.kind == structs && t.Field(f.index).Type.Kind() == reflect.Struct {
			return nil, fmt.Errorf("field %s: a struct argument must be a slice of structs", f.name)
		}
	}
	var b strings.Builder
	b.WriteString("local K, A = {}, {}\ndo\nlocal k, a = 1, 1\n")
	for _, f := range fs {
		writeReader(&b, "", f)
	}
	b.WriteString("end\n")
	return &argCodec{fields: fs, lua: b.String()}, nil
}

// writeReader writes the Lua that reads field f into table tbl (K or A
// for a top-level field, else the element table e).
func writeReader(b *strings.Builder, elem string, f field) {
	dst := func(key bool) string {
		if elem != "" {
			return elem + "." + f.name
		}
		if key {
			return "K." + f.name
		}
		return "A." + f.name
	}
	switch f.kind {
	case scalar:
		if f.key {
			fmt.Fprintf(b, "%s = KEYS[k]; k = k + 1\n", dst(true))
			return
		}
		fmt.Fprintf(b, "%s = %s; a = a + 1\n", dst(false), luaValue(f.typ, "ARGV[a]"))
	case list:
		src, idx := "ARGV[a]", "a"
		if f.key {
			src, idx = "KEYS[k]", "k"
		}
		fmt.Fprintf(b, "do local n = tonumber(ARGV[a]); a = a + 1; local t = {}; for j = 1, n do t[j] = %s; %s = %s + 1 end; %s = t end\n",
			src, idx, idx, dst(f.key))
	case structs:
		fmt.Fprintf(b, "do local n = tonumber(ARGV[a]); a = a + 1; local t = {}; for j = 1, n do local e = {}\n")
		for _, ef := range f.elem {
			writeReader(b, "e", ef)
		}
		fmt.Fprintf(b, "t[j] = e end; %s = t end\n", dst(false))
	}
}

// luaValue is the Lua expression that turns the wire string src into the
// Lua value of Go type t.
func luaValue(t reflect.Type, src string) string {
	switch {
	case t.Kind() == reflect.Bool:
		return "(" + src + " == '1')"
	case t.Kind() == reflect.String, t == reflect.TypeFor[[]byte]():
		return src
	default:
		return "tonumber(" + src + ")"
	}
}

// encode returns v's fields as KEYS and ARGV. v must be addressable (the
// element of the *A the caller passed): a string travels as a pointer to
// v's own field (go-redis writes *string as the string), so ARGV costs no
// copy nor allocation per string, and v must not change until the command
// has been written (Run returns, a queued Call's pipeline ran).
func (c *argCodec) encode(v reflect.Value) (keys []string, argv []any) {
	keys, args := c.command(v)
	return keys, args[commandHead+len(keys):]
}

// commandHead is how many arguments of a script's command come before its
// keys: EVALSHA (or EVAL), the SHA (or the source), the number of keys.
const commandHead = 3

// command is encode into one argument list for the script's command, so
// a run allocates it once: commandHead slots the caller fills, then the
// keys — each a pointer into keys, which go-redis writes as the string —
// then ARGV. keys is allocated at its size and never grows, so the
// pointers stay valid.
func (c *argCodec) command(v reflect.Value) (keys []string, args []any) {
	nk, na := countFields(c.fields, v)
	keys, args = encodeFields(c.fields, v, make([]string, 0, nk), make([]any, commandHead+nk, commandHead+nk+na))
	for i := range keys {
		args[commandHead+i] = &keys[i]
	}
	return keys, args
}

// countFields is how many KEYS and ARGV entries encodeFields appends for v,
// so both are allocated once at their size.
func countFields(fs []field, v reflect.Value) (keys, argv int) {
	for _, f := range fs {
		switch f.kind {
		case scalar:
			if f.key {
				keys++
			} else {
				argv++
			}
		case list:
			argv++
			if f.key {
				keys += v.Field(f.index).Len()
			} else {
				argv += v.Field(f.index).Len()
			}
		case structs:
			argv++
			fv := v.Field(f.index)
			for i := range fv.Len() {
				k, a := countFields(f.elem, fv.Index(i))
				keys, argv = keys+k, argv+a
			}
		}
	}
	return keys, argv
}

func encodeFields(fs []field, v reflect.Value, keys []string, argv []any) ([]string, []any) {
	for _, f := range fs {
		fv := v.Field(f.index)
		switch f.kind {
		case scalar:
			if f.key {
				keys = append(keys, fv.String())
			} else {
				argv = append(argv, wire(fv))
			}
		case list:
			argv = append(argv, fv.Len())
			for i := range fv.Len() {
				if f.key {
					keys = append(keys, fv.Index(i).String())
				} else {
					argv = append(argv, wire(fv.Index(i)))
				}
			}
		case structs:
			argv = append(argv, fv.Len())
			for i := range fv.Len() {
				keys, argv = encodeFields(f.elem, fv.Index(i), keys, argv)
			}
		}
	}
	return keys, argv
}

// wire is the ARGV form of one scalar, in a type go-redis writes as
// the script expects: integers as int64 or uint64 (written in decimal, so a
// Lua number like 1.7e12 never reaches Redis in exponent form), durations
// in whole milliseconds, booleans as '1' or '0', floats in the shortest
// decimal form ('f'), an addressable string as a pointer to it (no copy).
func wire(v reflect.Value) any {
	if v.Type() == durationType {
		return time.Duration(v.Int()).Milliseconds()
	}
	switch v.Kind() {
	case reflect.String:
		if v.CanAddr() && v.Type() == stringType {
			return v.Addr().Interface()
		}
		return v.String()
	case reflect.Bool:
		if v.Bool() {
			return "1"
		}
		return "0"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint()
	case reflect.Float64:
		return v.Float()
	}
	return v.Bytes() // []byte
}

var stringType = reflect.TypeFor[string]()

// replyCodec decodes a script's name/value reply into a struct type.
type replyCodec struct {
	fields []field
	byName map[string]*field
}

func replyCodecOf(t reflect.Type) (*replyCodec, error) {
	fs, err := fieldsOf(t, true)
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		if f.key {
			return nil, fmt.Errorf("field %s: a reply has no keys", f.name)
		}
	}
	return newReplyCodec(fs), nil
}

func newReplyCodec(fs []field) *replyCodec {
	c := &replyCodec{fields: fs, byName: make(map[string]*field, len(fs))}
	for i := range fs {
		if fs[i].kind == structs {
			fs[i].codec = newReplyCodec(fs[i].elem) // once, not per reply decoded
		}
		c.byName[fs[i].name] = &fs[i]
	}
	return c
}

// decode fills struct dst from reply v, an array of name/value pairs.
func (c *replyCodec) decode(v any, dst reflect.Value) error {
	pairs, ok := v.([]any)
	if !ok {
		return fmt.Errorf("got %T, want an array of name/value pairs", v)
	}
	if len(pairs)%2 != 0 {
		return fmt.Errorf("odd number of items (%d) in a name/value reply", len(pairs))
	}
	for i := 0; i < len(pairs); i += 2 {
		name, ok := pairs[i].(string)
		if !ok {
			return fmt.Errorf("item %d: name is %T, want a string", i+1, pairs[i])
		}
		f, ok := c.byName[name]
		if !ok {
			return fmt.Errorf("unknown name %q", name)
		}
		if pairs[i+1] == nil {
			continue
		}
		if err := decodeField(f, pairs[i+1], dst.Field(f.index)); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func decodeField(f *field, v any, dst reflect.Value) error {
	switch f.kind {
	case scalar:
		return decodeScalar(v, dst)
	case list:
		return decodeItems(v, dst, "an array", decodeScalar)
	case structs:
		ec := f.codec
		if dst.Kind() == reflect.Struct {
			return ec.decode(v, dst)
		}
		return decodeItems(v, dst, "an array of replies", ec.decode)
	}
	return nil
}

// decodeItems sets the slice dst from the reply array v, each item by
// decode (a nil item, Lua's false, leaves its element zero); want names
// what v must be in the error when it is not an array.
func decodeItems(v any, dst reflect.Value, want string, decode func(any, reflect.Value) error) error {
	items, ok := v.([]any)
	if !ok {
		return fmt.Errorf("got %T, want %s", v, want)
	}
	out := reflect.MakeSlice(dst.Type(), len(items), len(items))
	for i, it := range items {
		if it == nil {
			continue
		}
		if err := decode(it, out.Index(i)); err != nil {
			return fmt.Errorf("item %d: %w", i+1, err)
		}
	}
	dst.Set(out)
	return nil
}

// decodeScalar sets dst from a reply value: an int64 (a Lua number) or a
// string (a Lua string).
func decodeScalar(v any, dst reflect.Value) error {
	switch x := v.(type) {
	case int64:
		if dst.Type() == durationType {
			dst.SetInt(int64(time.Duration(x) * time.Millisecond))
			return nil
		}
		switch dst.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			dst.SetInt(x)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			dst.SetUint(uint64(x))
		case reflect.Float64:
			dst.SetFloat(float64(x))
		case reflect.Bool:
			dst.SetBool(x != 0)
		case reflect.String:
			dst.SetString(strconv.FormatInt(x, 10))
		default:
			return fmt.Errorf("an integer cannot go into %s", dst.Type())
		}
	case string:
		if dst.Type() == durationType {
			n, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				return err
			}
			dst.SetInt(int64(time.Duration(n) * time.Millisecond))
			return nil
		}
		switch dst.Kind() {
		case reflect.String:
			dst.SetString(x)
		case reflect.Slice: // []byte
			dst.SetBytes([]byte(x))
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			n, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				return err
			}
			dst.SetInt(n)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			n, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				return err
			}
			dst.SetUint(n)
		case reflect.Float64:
			n, err := strconv.ParseFloat(x, 64)
			if err != nil {
				return err
			}
			dst.SetFloat(n)
		case reflect.Bool:
			dst.SetBool(x == "1" || x == "true")
		default:
			return fmt.Errorf("a string cannot go into %s", dst.Type())
		}
	default:
		return fmt.Errorf("got %T, want an integer or a string", v)
	}
	return nil
}
