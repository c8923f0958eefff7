// Package durflag is the one flag type every duration flag of rdmabench and
// ncclbench uses: a bare number is seconds, as perftest's and nccl-tests'
// users type it (--timeout 30, -D 2.5), and a Go duration (30s, 1m30s,
// 500ms) is taken as well.
package durflag

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

// want is what every refusal says: the two forms a duration may take.
const want = "want seconds (30, 2.5) or a duration (30s, 1m30s, 500ms)"

// Parse reads a duration flag's value: a bare number is seconds.
// Negative, infinite and unparsable values are refused.
func Parse(s string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		switch {
		case math.IsNaN(f) || math.IsInf(f, 0):
			return 0, errors.New(want)
		case f < 0:
			return 0, errors.New("must not be negative")
		case f*float64(time.Second) >= math.MaxInt64:
			return 0, errors.New("too long")
		}
		return time.Duration(math.Round(f * float64(time.Second))), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		// time's own message ("time: missing unit in duration ...")
		// repeats the value pflag already quotes: say what to type.
		return 0, errors.New(want)
	}
	if d < 0 {
		return 0, errors.New("must not be negative")
	}
	return d, nil
}

// Value is a duration flag's pflag.Value.
type Value struct{ d *time.Duration }

// New makes a Value that stores into p, which it sets to def.
func New(p *time.Duration, def time.Duration) Value {
	*p = def
	return Value{p}
}

// Set implements pflag.Value.
func (v Value) Set(s string) error {
	d, err := Parse(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

// String implements pflag.Value. Zero is "0", which pflag's help takes as
// "no default worth showing".
func (v Value) String() string {
	if v.d == nil || *v.d == 0 {
		return "0"
	}
	return v.d.String()
}

// Type implements pflag.Value: the word help shows after the flag.
func (Value) Type() string { return "duration" }

// VarP defines a duration flag that stores into p.
func VarP(fs *pflag.FlagSet, p *time.Duration, name, short string, def time.Duration, usage string) {
	fs.VarP(New(p, def), name, short, usage)
}

// P defines a duration flag and returns where its value is stored.
func P(fs *pflag.FlagSet, name, short string, def time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	VarP(fs, p, name, short, def, usage)
	return p
}

// Seconds prints d as a bare number of seconds, the form the flags take,
// for messages that name a flag's value ("--duration 0 outside 0.1..86400").
func Seconds(d time.Duration) string {
	return fmt.Sprintf("%g", d.Seconds())
}
