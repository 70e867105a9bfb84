package pubsub

import (
	"slices"
	"testing"

	"github.com/hamba/avro/v2"
)

// TestDecodeBitmap: the first element is the bitmap of top-level field
// positions (bit i, from the least significant bit, is field i); "P-0x…"
// elements are bitmaps of the fields of the compound field at position P
// ("Event Deserialization Considerations"); malformed bitmaps are errors.
func TestDecodeBitmap(t *testing.T) {
	sc := avro.MustParse(`{"type":"record","name":"AccountChangeEvent","fields":[
		{"name":"ChangeEventHeader","type":"string"},
		{"name":"Name","type":["null","string"]},
		{"name":"Status__c","type":["null","string"]},
		{"name":"LastModifiedDate","type":["null","long"]},
		{"name":"BillingAddress","type":["null",{"type":"record","name":"Address","fields":[
			{"name":"Street","type":["null","string"]},{"name":"City","type":["null","string"]},
			{"name":"PostalCode","type":["null","string"]}]}]},
		{"name":"F5","type":["null","string"]},{"name":"F6","type":["null","string"]},
		{"name":"F7","type":["null","string"]},{"name":"F8","type":["null","string"]},
		{"name":"F9","type":["null","string"]}]}`)
	for _, tt := range []struct {
		name   string
		bitmap []string
		want   []string
	}{
		{"none", nil, nil},
		{"one field", []string{"0x04"}, []string{"Status__c"}},
		{"odd digits", []string{"0x4"}, []string{"Status__c"}},
		{"two bytes", []string{"0x020C"}, []string{"Status__c", "LastModifiedDate", "F9"}},
		{"lower case", []string{"0x0a"}, []string{"Name", "LastModifiedDate"}},
		{"compound", []string{"0x08", "4-0x05"}, []string{"LastModifiedDate", "BillingAddress.Street", "BillingAddress.PostalCode"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeBitmap(sc, tt.bitmap)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("DecodeBitmap(%q) = %v, %v; want %v", tt.bitmap, got, err, tt.want)
			}
		})
	}
	for _, bad := range [][]string{{"04"}, {"0xZZ"}, {"0x0400"}, {"1-0x01"}, {"12-0x01"}, {"x-0x01"}, {"4-0x08"}} {
		if got, err := DecodeBitmap(sc, bad); err == nil {
			t.Errorf("DecodeBitmap(%q) = %v, want an error", bad, got)
		}
	}
}
