package intlist

import (
	"slices"
	"testing"
)

func TestRanges(t *testing.T) {
	tests := []struct {
		in   []int
		want []string
	}{
		{nil, nil},
		{[]int{5}, []string{"5"}},
		{[]int{0, 1, 3}, []string{"0-1", "3"}},
		{[]int{0, 1, 2, 3, 8, 10, 11, 12}, []string{"0-3", "8", "10-12"}},
	}
	for _, tc := range tests {
		if got := Ranges(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Ranges(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestComma(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{nil, ""},
		{[]int{5}, "5"},
		{[]int{3, 1, -2}, "3,1,-2"},
	} {
		if got := Comma(tc.in); got != tc.want {
			t.Errorf("Comma(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
