package pubsub

import (
	"context"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/hamba/avro/v2"
)

// BitmapFields returns the field names a change event's bitmap field
// (changedFields, nulledFields or diffFields of its ChangeEventHeader)
// stands for, with the schema of schemaID. Errors: Schema's, or a bitmap
// that does not fit the schema (DecodeBitmap).
func (c *Client) BitmapFields(ctx context.Context, schemaID string, bitmap []string) ([]string, error) {
	if len(bitmap) == 0 {
		return nil, nil
	}
	sc, err := c.Schema(ctx, schemaID)
	if err != nil {
		return nil, err
	}
	return DecodeBitmap(sc, bitmap)
}

// DecodeBitmap decodes a bitmap field of a change event ("Event
// Deserialization Considerations", Pub/Sub API Developer Guide): the Pub/Sub
// API sends changedFields, nulledFields and diffFields as arrays of
// hexadecimal strings, not names. The first element, "0x…", is a bitmap
// of the top-level fields: bit i (counted from the least significant bit
// of the number the hex digits spell) set means the schema's field at
// position i. Each further element, "P-0x…", is the bitmap of the fields
// of the compound field at position P (a record, or a union of null and a
// record), returned as "Parent.Child". Errors: a malformed element, a bit
// or a position past the schema's fields, a position that is no compound
// field.
func DecodeBitmap(sc avro.Schema, bitmap []string) ([]string, error) {
	rec, ok := sc.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("pubsub: bitmap: the schema is not a record")
	}
	var names []string
	for _, el := range bitmap {
		parent, hex := "", el
		fields := rec.Fields()
		if pos, rest, nested := strings.Cut(el, "-"); nested {
			i, err := strconv.Atoi(pos)
			if err != nil || i < 0 || i >= len(fields) {
				return nil, fmt.Errorf("pubsub: bitmap %q: no field at position %q", el, pos)
			}
			inner := compound(fields[i].Type())
			if inner == nil {
				return nil, fmt.Errorf("pubsub: bitmap %q: field %s is not a compound field", el, fields[i].Name())
			}
			parent, hex, fields = fields[i].Name()+".", rest, inner.Fields()
		}
		digits, ok := strings.CutPrefix(hex, "0x")
		n, valid := new(big.Int).SetString(digits, 16)
		if !ok || !valid {
			return nil, fmt.Errorf("pubsub: bitmap %q: not a 0x hexadecimal bitmap", el)
		}
		for i := range n.BitLen() {
			if n.Bit(i) == 0 {
				continue
			}
			if i >= len(fields) {
				return nil, fmt.Errorf("pubsub: bitmap %q: bit %d past the schema's %d fields", el, i, len(fields))
			}
			names = append(names, parent+fields[i].Name())
		}
	}
	return names, nil
}

// compound returns the record of a compound field's type (the record, or
// the record of a union with null); nil for any other type.
func compound(t avro.Schema) *avro.RecordSchema {
	if u, ok := t.(*avro.UnionSchema); ok {
		for _, m := range u.Types() {
			if r, ok := m.(*avro.RecordSchema); ok {
				return r
			}
		}
	}
	r, _ := t.(*avro.RecordSchema)
	return r
}
