package salesforce

import (
	"encoding/xml"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
)

// apexObjectsDir is where the SFDX project in apex-stubs/ keeps its objects,
// relative to this package's directory (go test runs in it).
const apexObjectsDir = "../apex-stubs/force-app/main/default/objects"

// apexFieldMeta is what this package depends on in one .field-meta.xml file
// (Metadata API "CustomField"): name, type, size and the external-id flags.
type apexFieldMeta struct {
	FullName      string   `xml:"fullName"`
	Type          string   `xml:"type"`
	Length        int      `xml:"length"`
	Precision     int      `xml:"precision"`
	Scale         int      `xml:"scale"`
	ExternalID    bool     `xml:"externalId"`
	Unique        bool     `xml:"unique"`
	CaseSensitive bool     `xml:"caseSensitive"`
	Restricted    bool     `xml:"valueSet>restricted"`
	Values        []string `xml:"valueSet>valueSetDefinition>value>fullName"`
}

// apexObjectRules are the rules beyond name, type and size that an object's
// fields must follow: its external id and its picklists' values, in order.
type apexObjectRules struct {
	externalID string
	picklists  map[string][]string
}

// apexRules holds the rules of each object the proxy writes (contract §7, §8).
func apexRules() map[string]apexObjectRules {
	return map[string]apexObjectRules{
		FailedCalloutObject: {
			externalID: "Callout_Id__c",
			picklists:  map[string][]string{"Status__c": policy.RecordStatuses, "Reason__c": reasonStrings()},
		},
		CalloutResultEvent: {},
	}
}

// readApexFields parses every *.field-meta.xml in dir, keyed by the field
// name its file is named after.
func readApexFields(dir string) (map[string]apexFieldMeta, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.field-meta.xml"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no .field-meta.xml files in %s", dir)
	}
	fields := make(map[string]apexFieldMeta, len(paths))
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var meta apexFieldMeta
		if err := xml.Unmarshal(data, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		fields[strings.TrimSuffix(filepath.Base(path), ".field-meta.xml")] = meta
	}
	return fields, nil
}

// diffApexFields lists every disagreement between the Go mapping want and
// the field files got of object, in both directions, sorted.
func diffApexFields(object string, want []Field, got map[string]apexFieldMeta, rules apexObjectRules) []string {
	var diffs []string
	add := func(field, format string, args ...any) {
		diffs = append(diffs, fmt.Sprintf("%s.%s: %s", object, field, fmt.Sprintf(format, args...)))
	}
	declared := make(map[string]bool, len(want))
	for _, f := range want {
		declared[f.Name] = true
		meta, ok := got[f.Name]
		if !ok {
			add(f.Name, "in fields.go, but apex-stubs has no %s.field-meta.xml", f.Name)
			continue
		}
		diffs = append(diffs, diffApexField(object, f, meta)...)
	}
	for name := range got {
		if !declared[name] {
			add(name, "in apex-stubs, but not in fields.go")
		}
	}
	diffs = append(diffs, diffApexRules(object, got, rules)...)
	slices.Sort(diffs)
	return diffs
}

// diffApexField compares one field's name, type and size.
func diffApexField(object string, f Field, meta apexFieldMeta) []string {
	var diffs []string
	add := func(format string, args ...any) {
		diffs = append(diffs, fmt.Sprintf("%s.%s: %s", object, f.Name, fmt.Sprintf(format, args...)))
	}
	if meta.FullName != f.Name {
		add("<fullName> is %q", meta.FullName)
	}
	if FieldType(meta.Type) != f.Type {
		add("type %s in apex-stubs, %s in fields.go", meta.Type, f.Type)
		return diffs
	}
	switch f.Type {
	case Text, LongTextArea:
		if meta.Length != f.Length {
			add("length %d in apex-stubs, %d in fields.go", meta.Length, f.Length)
		}
	case Number:
		if meta.Precision != f.Length {
			add("precision %d in apex-stubs, %d in fields.go", meta.Precision, f.Length)
		}
		if meta.Scale != 0 {
			add("scale %d in apex-stubs; the proxy writes whole numbers", meta.Scale)
		}
	default:
		if f.Length != 0 {
			add("fields.go gives %s a length (%d)", f.Type, f.Length)
		}
	}
	return diffs
}

// diffApexRules checks the external id and the picklist values.
func diffApexRules(object string, got map[string]apexFieldMeta, rules apexObjectRules) []string {
	var diffs []string
	add := func(field, format string, args ...any) {
		diffs = append(diffs, fmt.Sprintf("%s.%s: %s", object, field, fmt.Sprintf(format, args...)))
	}
	if name := rules.externalID; name != "" {
		meta, ok := got[name]
		switch {
		case !ok:
			add(name, "external id has no field file")
		case !meta.ExternalID || !meta.Unique || !meta.CaseSensitive:
			add(name, "external id must be externalId, unique and caseSensitive (got %t, %t, %t)",
				meta.ExternalID, meta.Unique, meta.CaseSensitive)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(rules.picklists)) {
		meta, ok := got[name]
		if !ok {
			continue // reported as a missing field
		}
		if want := rules.picklists[name]; !slices.Equal(meta.Values, want) {
			add(name, "picklist values %q in apex-stubs, %q in fields.go", meta.Values, want)
		}
		if !meta.Restricted {
			add(name, "picklist is not restricted")
		}
	}
	return diffs
}

func TestApexObjectsMatchFieldMapping(t *testing.T) {
	rules := apexRules()
	for _, tc := range []struct {
		object string
		want   []Field
	}{
		{FailedCalloutObject, FailedCalloutFields},
		{CalloutResultEvent, CalloutResultFields},
	} {
		t.Run(tc.object, func(t *testing.T) {
			got, err := readApexFields(filepath.Join(apexObjectsDir, tc.object, "fields"))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Errorf("apex-stubs declares %d fields on %s, fields.go %d", len(got), tc.object, len(tc.want))
			}
			if diffs := diffApexFields(tc.object, tc.want, got, rules[tc.object]); len(diffs) > 0 {
				t.Errorf("apex-stubs and salesforce/fields.go disagree on %s:\n%s", tc.object, strings.Join(diffs, "\n"))
			}
		})
	}
}

// TestApexFieldComparisonCatchesDisagreement feeds diffApexFields modified
// in-memory copies of the onDisk field files and mapping: each change must be
// reported, so a passing TestApexObjectsMatchFieldMapping means something.
func TestApexFieldComparisonCatchesDisagreement(t *testing.T) {
	onDisk, err := readApexFields(filepath.Join(apexObjectsDir, FailedCalloutObject, "fields"))
	if err != nil {
		t.Fatal(err)
	}
	rules := apexRules()[FailedCalloutObject]
	if diffs := diffApexFields(FailedCalloutObject, FailedCalloutFields, onDisk, rules); len(diffs) != 0 {
		t.Fatalf("baseline must agree, got:\n%s", strings.Join(diffs, "\n"))
	}
	set := func(name string, change func(*apexFieldMeta)) func([]Field, map[string]apexFieldMeta) []Field {
		return func(want []Field, got map[string]apexFieldMeta) []Field {
			meta := got[name]
			meta.Values = slices.Clone(meta.Values)
			change(&meta)
			got[name] = meta
			return want
		}
	}
	tests := []struct {
		name   string
		mutate func([]Field, map[string]apexFieldMeta) []Field
		want   string
	}{
		{"field file missing", func(w []Field, g map[string]apexFieldMeta) []Field {
			delete(g, "Endpoint__c")
			return w
		}, "Endpoint__c: in fields.go, but apex-stubs has no"},
		{"field missing from fields.go", func(w []Field, g map[string]apexFieldMeta) []Field {
			return slices.DeleteFunc(w, func(f Field) bool { return f.Name == "Last_Error__c" })
		}, "Last_Error__c: in apex-stubs, but not in fields.go"},
		{"extra field file", func(w []Field, g map[string]apexFieldMeta) []Field {
			g["Extra__c"] = apexFieldMeta{FullName: "Extra__c", Type: "Text", Length: 10}
			return w
		}, "Extra__c: in apex-stubs, but not in fields.go"},
		{"type differs", set("Method__c", func(m *apexFieldMeta) { m.Type = "LongTextArea" }),
			"Method__c: type LongTextArea in apex-stubs, Text in fields.go"},
		{"text length differs", set("Callout_Id__c", func(m *apexFieldMeta) { m.Length = 80 }),
			"Callout_Id__c: length 80 in apex-stubs, 64 in fields.go"},
		{"long text length differs", set("Request_Body__c", func(m *apexFieldMeta) { m.Length = 32768 }),
			"Request_Body__c: length 32768 in apex-stubs, 131072 in fields.go"},
		{"precision differs", set("Attempts__c", func(m *apexFieldMeta) { m.Precision = 5 }),
			"Attempts__c: precision 5 in apex-stubs, 4 in fields.go"},
		{"decimal places", set("Last_Status_Code__c", func(m *apexFieldMeta) { m.Scale = 2 }),
			"Last_Status_Code__c: scale 2"},
		{"fullName differs from file name", set("Path__c", func(m *apexFieldMeta) { m.FullName = "Paths__c" }),
			`Path__c: <fullName> is "Paths__c"`},
		{"external id not case-sensitive", set("Callout_Id__c", func(m *apexFieldMeta) { m.CaseSensitive = false }),
			"Callout_Id__c: external id must be"},
		{"external id not unique", set("Callout_Id__c", func(m *apexFieldMeta) { m.Unique = false }),
			"Callout_Id__c: external id must be"},
		{"status values reordered", set("Status__c", func(m *apexFieldMeta) { m.Values[0], m.Values[1] = m.Values[1], m.Values[0] }),
			"Status__c: picklist values"},
		{"reason value missing", set("Reason__c", func(m *apexFieldMeta) { m.Values = m.Values[:len(m.Values)-1] }),
			"Reason__c: picklist values"},
		{"picklist not restricted", set("Status__c", func(m *apexFieldMeta) { m.Restricted = false }),
			"Status__c: picklist is not restricted"},
		{"length on a checkbox in fields.go", func(w []Field, g map[string]apexFieldMeta) []Field {
			for i := range w {
				if w[i].Name == "Request_Body_Truncated__c" {
					w[i].Length = 1
				}
			}
			return w
		}, "Request_Body_Truncated__c: fields.go gives Checkbox a length (1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := maps.Clone(onDisk)
			want := tt.mutate(slices.Clone(FailedCalloutFields), got)
			diffs := diffApexFields(FailedCalloutObject, want, got, rules)
			if len(diffs) == 0 {
				t.Fatal("the disagreement went unreported")
			}
			joined := strings.Join(diffs, "\n")
			if !strings.Contains(joined, tt.want) {
				t.Errorf("diffs do not mention %q:\n%s", tt.want, joined)
			}
		})
	}
}

// TestStatusPicklistDefaultIsNew: the proxy creates Failed_Callout__c
// records without Status__c (it belongs to the admin after the first
// write), so they show the picklist's default value; it must be New, as
// the emulator's Defaults (helpers_test.go) assume.
func TestStatusPicklistDefaultIsNew(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(apexObjectsDir, FailedCalloutObject, "fields", "Status__c.field-meta.xml"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Values []struct {
			FullName string `xml:"fullName"`
			Default  bool   `xml:"default"`
		} `xml:"valueSet>valueSetDefinition>value"`
	}
	if err := xml.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range meta.Values {
		if v.Default {
			got = append(got, v.FullName)
		}
	}
	if !slices.Equal(got, []string{policy.RecordNew}) || defaults()[FailedCalloutObject]["Status__c"] != policy.RecordNew {
		t.Errorf("Status__c defaults = %v, want [New]", got)
	}
}

// reasonStrings are policy.DeadLetterReasons as picklist values.
func reasonStrings() []string {
	out := make([]string, len(policy.DeadLetterReasons))
	for i, r := range policy.DeadLetterReasons {
		out[i] = string(r)
	}
	return out
}
