package policy

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

// sumCeilings adds the default-shaped ceilings by hand: 5 s doubling, capped
// at 6 h, for gaps gaps.
func sumCeilings(gaps int) time.Duration {
	var sum time.Duration
	c := 5 * time.Second
	for range gaps {
		sum += min(c, 6*time.Hour)
		c *= 2
		c = min(c, 6*time.Hour)
	}
	return sum
}

func withAttempts(n int) Policy {
	p := Defaults()
	p.MaxAttempts = n
	return p
}

func TestBackoffEnvelope(t *testing.T) {
	hours72 := 72 * time.Hour
	x1 := withAttempts(math.MaxInt)
	x1.Multiplier = 1
	tests := []struct {
		name string
		p    Policy
		want Envelope
	}{
		// 5+10+20+…+5120 s = 5·(2¹¹−1) = 10235 s ≈ 2.84 h.
		{"defaults", Defaults(), Envelope{Gaps: 11, Longest: 10235 * time.Second, Mean: 5117500 * time.Millisecond}},
		{"defaults summed by hand", Defaults(), Envelope{Gaps: 11, Longest: sumCeilings(11), Mean: sumCeilings(11) / 2}},
		{"one attempt: no gaps", withAttempts(1), Envelope{}},
		{"zero attempts: no gaps", withAttempts(0), Envelope{}},
		{"negative attempts: no gaps", withAttempts(-3), Envelope{}},
		{"two attempts", withAttempts(2), Envelope{Gaps: 1, Longest: 5 * time.Second, Mean: 2500 * time.Millisecond}},
		// 10235 + 10240 + 20480 + 6·21600 = 170555 s ≈ 47.4 h: under 72 h.
		{"20 attempts reach max_delay", withAttempts(20), Envelope{Gaps: 19, Longest: 170555 * time.Second, Mean: 85277500 * time.Millisecond}},
		// 10235 + 10240 + 20480 + 16·21600 = 386555 s: longest capped, mean not.
		{"30 attempts: longest capped by max_age", withAttempts(30), Envelope{Gaps: 29, Longest: hours72, Mean: 193277500 * time.Millisecond}},
		{"100 attempts: both capped", withAttempts(100), Envelope{Gaps: 99, Longest: hours72, Mean: hours72}},
		{"MaxInt attempts", withAttempts(math.MaxInt), Envelope{Gaps: math.MaxInt - 1, Longest: hours72, Mean: hours72}},
		{"MaxInt attempts, multiplier 1", x1, Envelope{Gaps: math.MaxInt - 1, Longest: hours72, Mean: hours72}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := BackoffEnvelope(tt.p)
			if got != tt.want {
				t.Errorf("BackoffEnvelope = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// The defaults' envelope is what contract §3 promises: at most about 2.8 h.
func TestBackoffEnvelopeDefaultsMatchSpec(t *testing.T) {
	e := BackoffEnvelope(Defaults())
	if h := e.Longest.Hours(); h < 2.8 || h > 2.85 {
		t.Errorf("longest = %.3f h, want about 2.84 h", h)
	}
	if e.Shortest != 0 {
		t.Errorf("shortest = %v, want 0 (full jitter can draw 0)", e.Shortest)
	}
}

// Past the exact limit the closed-form geometric tail agrees with adding
// every gap one by one.
func TestBackoffSumClosedFormTail(t *testing.T) {
	tests := []struct {
		name string
		p    Policy
		gaps int
	}{
		{"x1.5 to cap", withBackoff(time.Second, 1.5, time.Hour), 200},
		{"x1.5 before cap", withBackoff(time.Second, 1.5, time.Hour), 18},
		{"x2 defaults", Defaults(), 50},
		{"x1.0001 slow growth", withBackoff(time.Second, 1.0001, time.Hour), 100000},
		{"x1.0001 never capped", withBackoff(time.Second, 1.0001, time.Hour), 60000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exact := backoffSum(tt.p, tt.gaps, math.MaxInt)
			closed := backoffSum(tt.p, tt.gaps, 3)
			if rel := math.Abs(float64(closed-exact)) / float64(exact); rel > 1e-9 {
				t.Errorf("closed form %v vs exact %v: relative error %g", closed, exact, rel)
			}
		})
	}
}

func TestEnvelopeJSON(t *testing.T) {
	tests := []struct {
		name string
		e    Envelope
		want string
	}{
		{"defaults", BackoffEnvelope(Defaults()), `{"gaps":11,"shortest_ms":0,"mean_ms":5117500,"longest_ms":10235000}`},
		{"zero", Envelope{}, `{"gaps":0,"shortest_ms":0,"mean_ms":0,"longest_ms":0}`},
		{"sub-millisecond truncates", Envelope{Gaps: 1, Mean: 1500 * time.Microsecond, Longest: 3 * time.Millisecond}, `{"gaps":1,"shortest_ms":0,"mean_ms":1,"longest_ms":3}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.e)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("Marshal = %s, want %s", b, tt.want)
			}
			var back Envelope
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			want := Envelope{Gaps: tt.e.Gaps, Shortest: tt.e.Shortest.Truncate(time.Millisecond),
				Mean: tt.e.Mean.Truncate(time.Millisecond), Longest: tt.e.Longest.Truncate(time.Millisecond)}
			if back != want {
				t.Errorf("round trip = %+v, want %+v", back, want)
			}
		})
	}
}

func TestEnvelopeUnmarshalErrors(t *testing.T) {
	for _, in := range []string{`{"gaps":`, `{"gaps":"eleven"}`, `{"mean_ms":1.5}`, `[]`} {
		t.Run(in, func(t *testing.T) {
			var e Envelope
			if err := json.Unmarshal([]byte(in), &e); err == nil {
				t.Errorf("Unmarshal(%s) = nil error, got %+v", in, e)
			}
		})
	}
}
