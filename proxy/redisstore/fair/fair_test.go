package fair

import (
	"slices"
	"testing"
)

func TestShares(t *testing.T) {
	for _, tt := range []struct {
		wants []int
		total int
		want  []int
	}{
		{[]int{3, 5}, 0, []int{3, 5}},       // no bound: each its want
		{[]int{3, 5}, 4, []int{2, 2}},       // one slot at a time, in order
		{[]int{1, 5, 2}, 6, []int{1, 3, 2}}, // a want met drops out
		{[]int{2, 2}, 3, []int{2, 1}},       // the odd slot goes first in order
		{[]int{2, 2}, 9, []int{2, 2}},       // never more than a want
	} {
		if got := Shares(tt.wants, tt.total); !slices.Equal(got, tt.want) {
			t.Errorf("Shares(%v, %d) = %v, want %v", tt.wants, tt.total, got, tt.want)
		}
	}
}

func TestSpread(t *testing.T) {
	for _, tt := range []struct {
		name       string
		qs         []Queue
		batch, rot int
		want       []int
	}{
		{"the busier organisation waits", []Queue{{"a", 3, 9}, {"b", 0, 9}}, 3, 0, []int{0, 3}},
		{"equal load alternates", []Queue{{"a", 0, 9}, {"b", 0, 9}}, 4, 0, []int{2, 2}},
		{"ties start at rot", []Queue{{"a", 0, 9}, {"b", 0, 9}}, 1, 1, []int{0, 1}},
		{"one organisation's shards share evenly", []Queue{{"a", 0, 9}, {"a", 0, 9}}, 3, 0, []int{2, 1}},
		{"never more than due", []Queue{{"a", 0, 1}, {"b", 5, 9}}, 4, 0, []int{1, 3}},
		{"nothing due", []Queue{{"a", 0, 0}}, 2, 0, []int{0}},
		{"no batch", []Queue{{"a", 0, 9}}, -1, 0, []int{0}},
	} {
		if got := Spread(tt.qs, tt.batch, tt.rot, nil); !slices.Equal(got, tt.want) {
			t.Errorf("%s: Spread = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// An organisation at its cap takes nothing more, across its shards, and
// the slots go to the others; however many organisations are running, the
// last slot goes only to one with none in flight (contract §10 "Fair
// dispatch").
func TestSpreadWithRoom(t *testing.T) {
	for _, tt := range []struct {
		name     string
		qs       []Queue
		batch    int
		inFlight map[string]int
		want     []int
	}{
		{"at its cap: nothing", []Queue{{"a", 15, 300}}, 1, map[string]int{"a": 15}, []int{0}},
		{"the kept slot goes to another", []Queue{{"a", 15, 300}, {"b", 0, 10}}, 1, map[string]int{"a": 15},
			[]int{0, 1}},
		{"two running organisations leave it too", []Queue{{"a", 8, 150}, {"b", 0, 10}, {"c", 7, 150}}, 1,
			map[string]int{"a": 8, "c": 7}, []int{0, 1, 0}},
		{"running ones share what is left but the kept slot", []Queue{{"a", 7, 150}, {"c", 7, 150}}, 2,
			map[string]int{"a": 7, "c": 7}, []int{1, 0}},
		{"the pool bounds one organisation's shards together, the kept slot stays", []Queue{{"a", 0, 9}, {"a", 0, 9},
			{"b", 0, 1}}, 6, map[string]int{"a": 12}, []int{1, 1, 1}},
		{"from nothing in flight: all but the kept slot", []Queue{{"a", 0, 30}, {"b", 0, 30}}, 16, nil,
			[]int{8, 7}},
	} {
		room, _ := RoomFor(tt.qs, 15, tt.inFlight)
		if got := Spread(tt.qs, tt.batch, 0, room); !slices.Equal(got, tt.want) {
			t.Errorf("%s: Spread = %v, want %v", tt.name, got, tt.want)
		}
	}
	if got := Spread([]Queue{{"a", 0, 9}}, 4, 0, nil); !slices.Equal(got, []int{4}) {
		t.Errorf("no room: Spread = %v, want [4]", got)
	}
}

func TestRoomFor(t *testing.T) {
	qs := []Queue{{"a", 15, 200}, {"a", 0, 100}, {"b", 0, 10}}
	room, capped := RoomFor(qs, 15, map[string]int{"a": 15})
	if room.Pool != 0 || capped != 309 {
		t.Fatalf("RoomFor = %+v, capped %d; want pool 0, 309 left out (all of a's, 9 of b's)", room, capped)
	}
	if room, capped := RoomFor(qs, 15, map[string]int{"a": 3}); room.Pool != 12 || capped != 310-13 {
		t.Fatalf("RoomFor = %+v, capped %d; want pool 12, and the kept slot for b: %d left out", room, capped, 310-13)
	}
	two := []Queue{{"a", 8, 150}, {"b", 0, 10}, {"c", 8, 150}}
	if room, capped := RoomFor(two, 15, map[string]int{"a": 8, "c": 8}); room.Pool != 0 || capped != 309 {
		t.Fatalf("two running: RoomFor = %+v, capped %d; want pool 0 and all but b's one left out (309)", room, capped)
	}
	if room, capped := RoomFor(qs, 0, nil); room != nil || capped != 0 {
		t.Fatalf("RoomFor without a cap = %v, %d; want nil, 0", room, capped)
	}
}
