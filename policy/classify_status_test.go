package policy

import (
	"fmt"
	"testing"
)

// wantStatus is the contract §2 table restated independently of
// classifyStatus, so the loop below checks one against the other.
func wantStatus(status int) Classification {
	switch {
	case status/100 == 2:
		return Classification{Success, ReasonStatus2xx}
	case status == 501:
		return Classification{Permanent, ReasonStatus501}
	case status == 505:
		return Classification{Permanent, ReasonStatus505}
	case status/100 == 5:
		return Classification{Retryable, ReasonStatus5xx}
	case status == 408:
		return Classification{Retryable, ReasonStatus408}
	case status == 429:
		return Classification{Retryable, ReasonStatus429}
	case status/100 == 4:
		return Classification{Permanent, ReasonStatus4xx}
	case status/100 == 3:
		return Classification{Permanent, ReasonStatus3xx}
	default:
		return Classification{Permanent, ReasonStatus1xx}
	}
}

func TestClassifyEveryStatus(t *testing.T) {
	for status := 100; status <= 599; status++ {
		got := Classify(status, nil)
		if want := wantStatus(status); got != want {
			t.Errorf("Classify(%d, nil) = %+v, want %+v", status, got, want)
		}
	}
}

func TestClassifyStatusTable(t *testing.T) {
	tests := []struct {
		status int
		want   Classification
	}{
		{100, Classification{Permanent, ReasonStatus1xx}},
		{101, Classification{Permanent, ReasonStatus1xx}},
		{199, Classification{Permanent, ReasonStatus1xx}},
		{200, Classification{Success, ReasonStatus2xx}},
		{201, Classification{Success, ReasonStatus2xx}},
		{202, Classification{Success, ReasonStatus2xx}},
		{204, Classification{Success, ReasonStatus2xx}},
		{299, Classification{Success, ReasonStatus2xx}},
		{300, Classification{Permanent, ReasonStatus3xx}},
		{301, Classification{Permanent, ReasonStatus3xx}},
		{304, Classification{Permanent, ReasonStatus3xx}},
		{307, Classification{Permanent, ReasonStatus3xx}},
		{308, Classification{Permanent, ReasonStatus3xx}},
		{400, Classification{Permanent, ReasonStatus4xx}},
		{401, Classification{Permanent, ReasonStatus4xx}},
		{403, Classification{Permanent, ReasonStatus4xx}},
		{404, Classification{Permanent, ReasonStatus4xx}},
		{407, Classification{Permanent, ReasonStatus4xx}},
		{408, Classification{Retryable, ReasonStatus408}},
		{409, Classification{Permanent, ReasonStatus4xx}},
		{422, Classification{Permanent, ReasonStatus4xx}},
		{425, Classification{Permanent, ReasonStatus4xx}},
		{428, Classification{Permanent, ReasonStatus4xx}},
		{429, Classification{Retryable, ReasonStatus429}},
		{431, Classification{Permanent, ReasonStatus4xx}},
		{499, Classification{Permanent, ReasonStatus4xx}},
		{500, Classification{Retryable, ReasonStatus5xx}},
		{501, Classification{Permanent, ReasonStatus501}},
		{502, Classification{Retryable, ReasonStatus5xx}},
		{503, Classification{Retryable, ReasonStatus5xx}},
		{504, Classification{Retryable, ReasonStatus5xx}},
		{505, Classification{Permanent, ReasonStatus505}},
		{506, Classification{Retryable, ReasonStatus5xx}},
		{507, Classification{Retryable, ReasonStatus5xx}},
		{511, Classification{Retryable, ReasonStatus5xx}},
		{599, Classification{Retryable, ReasonStatus5xx}},
		{0, Classification{Permanent, ReasonStatusInvalid}},
		{-1, Classification{Permanent, ReasonStatusInvalid}},
		{1, Classification{Permanent, ReasonStatusInvalid}},
		{99, Classification{Permanent, ReasonStatusInvalid}},
		{600, Classification{Permanent, ReasonStatusInvalid}},
		{999, Classification{Permanent, ReasonStatusInvalid}},
		{1000, Classification{Permanent, ReasonStatusInvalid}},
		{-500, Classification{Permanent, ReasonStatusInvalid}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			if got := Classify(tt.status, nil); got != tt.want {
				t.Errorf("Classify(%d, nil) = %+v, want %+v", tt.status, got, tt.want)
			}
		})
	}
}

// An error decides alone, whatever the status: a 200 whose body broke off is
// no answer, and an oversized 200 is permanent.
func TestClassifyErrorOverridesStatus(t *testing.T) {
	tests := []struct {
		name   string
		status int
		err    error
		want   Classification
	}{
		{"200 then body too large", 200, fmt.Errorf("read body: %w", ErrResponseTooLarge), Classification{Permanent, ReasonResponseTooLarge}},
		{"404 then body too large", 404, ErrResponseTooLarge, Classification{Permanent, ReasonResponseTooLarge}},
		{"200 then unexpected EOF", 200, fmt.Errorf("read body: %w", errUnexpectedEOFForTest), Classification{Retryable, ReasonEOF}},
		{"400 then reset", 400, errResetForTest, Classification{Retryable, ReasonReset}},
		{"0 with unknown error", 0, fmt.Errorf("boom"), Classification{Retryable, ReasonNetwork}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.status, tt.err); got != tt.want {
				t.Errorf("Classify(%d, %v) = %+v, want %+v", tt.status, tt.err, got, tt.want)
			}
		})
	}
}
