package policy

import (
	"fmt"
	"testing"
)

// wantStatus is the contract §2 table restated independently of
// classifyStatus (a table of the statuses with rules of their own, then one
// of the classes, where classifyStatus is a switch), so the loop below
// checks one against the other. status is 100 to 599.
func wantStatus(status int) Classification {
	own := map[int]Classification{
		408: {Retryable, ReasonStatus408},
		429: {Retryable, ReasonStatus429},
		501: {Permanent, ReasonStatus501},
		505: {Permanent, ReasonStatus505},
	}
	if c, ok := own[status]; ok {
		return c
	}
	return [...]Classification{
		1: {Permanent, ReasonStatus1xx},
		2: {Success, ReasonStatus2xx},
		3: {Permanent, ReasonStatus3xx},
		4: {Permanent, ReasonStatus4xx},
		5: {Retryable, ReasonStatus5xx},
	}[status/100]
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
	for _, c := range []struct {
		want     Classification
		statuses []int
	}{
		{Classification{Permanent, ReasonStatus1xx}, []int{100, 101, 199}},
		{Classification{Success, ReasonStatus2xx}, []int{200, 201, 202, 204, 299}},
		{Classification{Permanent, ReasonStatus3xx}, []int{300, 301, 304, 307, 308}},
		{Classification{Permanent, ReasonStatus4xx}, []int{400, 401, 403, 404, 407, 409, 422, 425, 428, 431, 499}},
		{Classification{Retryable, ReasonStatus408}, []int{408}},
		{Classification{Retryable, ReasonStatus429}, []int{429}},
		{Classification{Retryable, ReasonStatus5xx}, []int{500, 502, 503, 504, 506, 507, 511, 599}},
		{Classification{Permanent, ReasonStatus501}, []int{501}},
		{Classification{Permanent, ReasonStatus505}, []int{505}},
		{Classification{Permanent, ReasonStatusInvalid}, []int{0, -1, 1, 99, 600, 999, 1000, -500}},
	} {
		for _, status := range c.statuses {
			if got := Classify(status, nil); got != c.want {
				t.Errorf("Classify(%d, nil) = %+v, want %+v", status, got, c.want)
			}
		}
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
