package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// percentFlag is a flag whose unit is the percent (compare's --threshold
// and --confidence). The value as typed is kept, so that a message echoes
// it; a trailing "%" is allowed and says the unit outright. A bare value
// at or below 1 is refused where it reads as a fraction (0.95 for 95%):
// check says which unit is wanted.
type percentFlag struct {
	text    string
	v       float64
	percent bool // typed with a trailing "%"
	err     error
}

func newPercentFlag(v float64) *percentFlag {
	return &percentFlag{text: strconv.FormatFloat(v, 'g', -1, 64), v: v}
}

func (p *percentFlag) String() string { return p.text }

// Type is "float", as the flag's type reads in the reference pages.
func (p *percentFlag) Type() string { return "float" }

// Set keeps the text; check judges it, so that parsing never fails with
// pflag's own words.
func (p *percentFlag) Set(s string) error {
	p.text = s
	num, pct := strings.CutSuffix(strings.TrimSpace(s), "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		p.err = fmt.Errorf("not a number")
		return nil
	}
	p.v, p.percent, p.err = v, pct, nil
	return nil
}

// check returns the fraction the flag means, or one line that echoes the
// value as typed and names the unit expected. example is a typical value
// in percent (95, 5); a bare value below fractionBelow reads as a fraction
// rather than a percent and is refused unless written with "%".
func (p *percentFlag) check(name string, example float64, fractionBelow float64) (float64, error) {
	switch {
	case p.err != nil:
		return 0, fmt.Errorf("--%s %s: %v; give a percent such as %g", name, p.text, p.err, example)
	case p.v <= 0 || p.v >= 100:
		return 0, fmt.Errorf("--%s %s: outside (0, 100); give a percent such as %g", name, p.text, example)
	case !p.percent && p.v < fractionBelow:
		return 0, fmt.Errorf("--%s %s: the unit is the percent, give one such as %g (or write %s%% if %s percent is meant)", name, p.text, example, p.text, p.text)
	}
	return p.v / 100, nil
}
