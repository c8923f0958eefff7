package paste

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rdmabench/rdmabench/ethside"
)

// FloorDBm is the power kept for a dark lane (0 mW, "-inf dBm").
const FloorDBm = ethside.DarkDBm

// lineError is a parse problem at a 1-based line of the paste.
type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string {
	if e.line <= 0 {
		return e.msg
	}
	return fmt.Sprintf("line %d: %s", e.line, e.msg)
}

func errorf(line int, format string, args ...any) error {
	return &lineError{line: line, msg: fmt.Sprintf(format, args...)}
}

// firstErr keeps the first problem of a file: one line per file.
type firstErr struct{ err error }

func (f *firstErr) add(line int, format string, args ...any) {
	if f.err == nil {
		f.err = errorf(line, format, args...)
	}
}

// keyValue splits "Key : value" at its first colon, both trimmed; a
// line without a colon has ok false.
func keyValue(line string) (key, value string, ok bool) {
	k, v, found := strings.Cut(line, ":")
	if !found {
		return "", "", false
	}
	return strings.TrimSpace(k), strings.TrimSpace(v), true
}

// squash collapses runs of blanks, so ethtool's aligned names compare.
func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

// firstFloat parses the leading number of s ("+45.0°C", "3.2350 V",
// "30.56 degrees C / 87.01 degrees F").
func firstFloat(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	end := 0
	for end < len(s) && strings.IndexByte("+-.0123456789eE", s[end]) >= 0 {
		end++
	}
	for end > 0 { // "3.2V" fine; "1e" or "5-" trailing junk: back off
		v, err := strconv.ParseFloat(s[:end], 64)
		if err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
			return v, true
		}
		end--
	}
	return 0, false
}

// powerDBm reads "0.6310 mW / -2.00 dBm", "-inf dBm" with its mW, or
// mW alone, as dBm; 0 mW is FloorDBm.
func powerDBm(s string) (float64, bool) {
	mwPart, dbmPart, both := strings.Cut(s, "/")
	if both && strings.Contains(dbmPart, "dBm") && !strings.Contains(dbmPart, "inf") {
		if v, ok := firstFloat(dbmPart); ok {
			return max(v, FloorDBm), true
		}
	}
	if !strings.Contains(mwPart, "mW") {
		if v, ok := firstFloat(mwPart); ok && strings.Contains(mwPart, "dBm") {
			return max(v, FloorDBm), true
		}
		return 0, false
	}
	mw, ok := firstFloat(mwPart)
	if !ok || mw < 0 {
		return 0, false
	}
	if mw == 0 {
		return FloorDBm, true
	}
	return max(10*math.Log10(mw), FloorDBm), true
}

// onOff reads ethtool's and dcb's booleans.
func onOff(s string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "on", "yes", "1", "true", "enabled":
		return true, true
	case "off", "no", "0", "false", "disabled":
		return false, true
	}
	return false, false
}

// count reads a ring or channel count; "n/a" is 0.
func count(s string) (int, bool) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "n/a") {
		return 0, true
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

func ptr[T any](v T) *T { return &v }
