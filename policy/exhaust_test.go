package policy

import (
	"fmt"
	"testing"
	"time"
)

func TestExhausted(t *testing.T) {
	def := Defaults() // 12 attempts, 72h
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	one := Defaults()
	one.MaxAttempts = 1
	tests := []struct {
		name     string
		p        Policy
		attempts int
		first    time.Time
		now      time.Time
		want     bool
	}{
		{"no attempt yet", def, 0, time.Time{}, t0, false},
		{"no attempt yet, count reached", one, 1, time.Time{}, t0, true},
		{"first attempt just made", def, 1, t0, t0, false},
		{"11 attempts", def, 11, t0, t0.Add(time.Hour), false},
		{"12 attempts", def, 12, t0, t0.Add(time.Hour), true},
		{"13 attempts", def, 13, t0, t0.Add(time.Hour), true},
		{"1ns before max age", def, 3, t0, t0.Add(72*time.Hour - 1), false},
		{"exactly max age", def, 3, t0, t0.Add(72 * time.Hour), true},
		{"after max age", def, 3, t0, t0.Add(100 * time.Hour), true},
		{"clock behind first attempt", def, 3, t0, t0.Add(-time.Hour), false},
		{"max attempts 1 after one", one, 1, t0, t0, true},
		{"max attempts 1 before any", one, 0, time.Time{}, t0, false},
		{"negative attempts counter", def, -5, t0, t0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Exhausted(tt.p, tt.attempts, tt.first, tt.now); got != tt.want {
				t.Errorf("Exhausted(%d attempts, age %v) = %v, want %v", tt.attempts, tt.now.Sub(tt.first), got, tt.want)
			}
		})
	}
}

func TestNextAttemptFits(t *testing.T) {
	def := Defaults()
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		attempts int
		first    time.Time
		next     time.Time
		want     bool
	}{
		{"no attempt yet", 0, time.Time{}, t0.Add(1000 * time.Hour), true},
		{"after first", 1, t0, t0.Add(5 * time.Second), true},
		{"after 11 attempts", 11, t0, t0.Add(3 * time.Hour), true},
		{"after 12 attempts", 12, t0, t0.Add(3 * time.Hour), false},
		{"after 13 attempts", 13, t0, t0.Add(3 * time.Hour), false},
		{"next 1ns before the window ends", 5, t0, t0.Add(72*time.Hour - 1), true},
		{"next exactly at the window end", 5, t0, t0.Add(72 * time.Hour), false},
		{"next after the window", 5, t0, t0.Add(73 * time.Hour), false},
		{"next before first (clock skew)", 5, t0, t0.Add(-time.Second), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NextAttemptFits(def, tt.attempts, tt.first, tt.next); got != tt.want {
				t.Errorf("NextAttemptFits(%d attempts, next at +%v) = %v, want %v", tt.attempts, tt.next.Sub(tt.first), got, tt.want)
			}
		})
	}
}

// NextAttemptFits(next) is exactly !Exhausted(at next) on a grid around
// both limits.
func TestNextAttemptFitsAgreesWithExhausted(t *testing.T) {
	p := Defaults()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	offsets := []time.Duration{-time.Hour, 0, 1, time.Hour, 72*time.Hour - 1, 72 * time.Hour, 72*time.Hour + 1, 1000 * time.Hour}
	for _, first := range []time.Time{{}, t0} {
		for attempts := -1; attempts <= 14; attempts++ {
			for _, off := range offsets {
				next := t0.Add(off)
				t.Run(fmt.Sprintf("first %v attempts %d next %v", !first.IsZero(), attempts, off), func(t *testing.T) {
					fits, ex := NextAttemptFits(p, attempts, first, next), Exhausted(p, attempts, first, next)
					if fits == ex {
						t.Errorf("NextAttemptFits = %v and Exhausted = %v; want opposites", fits, ex)
					}
				})
			}
		}
	}
}
