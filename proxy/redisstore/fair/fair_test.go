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
		if got := Spread(tt.qs, tt.batch, tt.rot); !slices.Equal(got, tt.want) {
			t.Errorf("%s: Spread = %v, want %v", tt.name, got, tt.want)
		}
	}
}
