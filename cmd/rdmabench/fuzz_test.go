package main

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParseIntList is the --qps list: positive numbers, or one line of error.
func FuzzParseIntList(f *testing.F) {
	for _, s := range []string{"1,2,4,8,16", "1", " 3 , 5", "", ",", "0", "-1", "1,,2", "99999999999999999999", "1024,1025"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		list, err := parseIntList(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") && !strings.Contains(s, "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		if len(list) == 0 {
			t.Fatalf("parseIntList(%q) = %d numbers", s, len(list))
		}
		parts := make([]string, len(list))
		for i, n := range list {
			if n < 1 {
				t.Fatalf("parseIntList(%q) holds %d", s, n)
			}
			parts[i] = strconv.Itoa(n)
		}
		if back, err := parseIntList(strings.Join(parts, ",")); err != nil || len(back) != len(list) {
			t.Fatalf("%v does not read back: %v, %v", list, back, err)
		}
	})
}
