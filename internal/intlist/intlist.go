// Package intlist writes sorted integer lists in the kernel's range form
// ("0-3", "8"), as CPU lists and rank lists are read by people.
package intlist

import (
	"fmt"
	"strconv"
	"strings"
)

// Ranges is ns (sorted, no repeats) as runs of consecutive numbers: "5"
// alone, "0-3" for a run; the caller joins them.
func Ranges(ns []int) []string {
	var parts []string
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(ns[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", ns[i], ns[j]))
		}
		i = j + 1
	}
	return parts
}

// Comma is ns as written, comma-separated ("3,1,2"); "" for none.
func Comma(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}
