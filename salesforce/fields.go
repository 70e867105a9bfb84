// Package salesforce writes what the proxy must tell Salesforce: dead letters
// as Failed_Callout__c records upserted on the external id Callout_Id__c,
// status changes, Callout_Result__e completion events and owner
// notifications, through the REST API with the OAuth 2.0 JWT bearer flow.
package salesforce

// FieldType is a Salesforce custom field type as written in a
// .field-meta.xml file's <type> element.
type FieldType string

// The field types this package writes.
const (
	Text         FieldType = "Text"
	LongTextArea FieldType = "LongTextArea"
	Number       FieldType = "Number"
	Checkbox     FieldType = "Checkbox"
	DateTime     FieldType = "DateTime"
	Picklist     FieldType = "Picklist"
)

// LongTextMax is the most characters a Long Text Area holds (Salesforce
// "Custom Field Types": 131,072).
const LongTextMax = 131072

// Field is one custom field the proxy writes. Length is in characters for
// Text and LongTextArea, digits (precision) for Number, 0 otherwise.
type Field struct {
	Name   string
	Type   FieldType
	Length int
}

// FailedCalloutObject is the API name of the dead-letter sObject.
const FailedCalloutObject = "Failed_Callout__c"

// FailedCalloutFields is the one mapping of what the proxy writes to
// Failed_Callout__c. The object in apex-stubs/ must declare exactly these
// custom fields with these types and lengths; a test reads both.
var FailedCalloutFields = []Field{
	{"Callout_Id__c", Text, 64}, // external id, unique, case-sensitive
	{"Endpoint__c", Text, 63},
	{"Method__c", Text, 10},
	{"Path__c", LongTextArea, LongTextMax},
	{"Idempotency_Key__c", Text, 255},
	{"Source_Record_Id__c", Text, 18},
	{"Request_Headers__c", LongTextArea, LongTextMax},
	{"Request_Body__c", LongTextArea, LongTextMax},
	{"Request_Body_Truncated__c", Checkbox, 0},
	{"Request_Body_Base64__c", Checkbox, 0},
	{"Last_Status_Code__c", Number, 3},
	{"Last_Response_Body__c", LongTextArea, LongTextMax},
	{"Last_Response_Body_Truncated__c", Checkbox, 0},
	{"Last_Response_Body_Base64__c", Checkbox, 0},
	{"Last_Error__c", LongTextArea, LongTextMax},
	{"Attempts__c", Number, 4},
	{"Attempt_Log__c", LongTextArea, LongTextMax},
	{"First_Attempt_At__c", DateTime, 0},
	{"Last_Attempt_At__c", DateTime, 0},
	{"Dead_Lettered_At__c", DateTime, 0},
	{"Expires_At__c", DateTime, 0},
	{"Reason__c", Picklist, 0},
	{"Status__c", Picklist, 0},
	{"Replay_Callout_Id__c", Text, 64},
}

// CalloutResultEvent is the API name of the completion platform event.
const CalloutResultEvent = "Callout_Result__e"

// CalloutResultFields is what the proxy publishes on Callout_Result__e when
// a scheduled callout ends (contract §8). Body__c holds at most
// ResultBodyMax characters of the final response body.
var CalloutResultFields = []Field{
	{"Callout_Id__c", Text, 64},
	{"Endpoint__c", Text, 63},
	{"Source_Record_Id__c", Text, 18},
	{"State__c", Text, 20}, // succeeded | dead_lettered
	{"Status_Code__c", Number, 3},
	{"Body__c", LongTextArea, LongTextMax},
	{"Body_Truncated__c", Checkbox, 0},
}

// ResultBodyMax is the most characters of a final response body carried on
// a Callout_Result__e event.
const ResultBodyMax = 32768
