// Command benchstat is make bench's statistics: for each case, the median
// of the per-pair ratios rdmabench/perftest, a distribution-free interval
// on it and a verdict (faster, slower, level within ±x%), at a family-wise
// confidence over all the cases (Bonferroni). It reads ci/bench.sh's pairs
// (one case a line: NAME, higher|lower, UNIT, perftest's figures and
// rdmabench's, comma-separated, tab between fields; a figure that is not a
// number is a lost run), writes the table, and with --json the figures and
// verdicts (build/bench/bench.json); --pool reads such files instead and
// pools each case's pairs over several benches. A sixth field sets the
// ratio a case is held to instead of 1 (make bench-overhead: rdmabench at
// most 1.25 times the bare loop's cost); the baseline column is then what
// the case's name says.
//
//	benchstat [--confidence 0.95] [--json FILE] < pairs.tsv
//	benchstat [--confidence 0.95] --pool A.json B.json ...
//
// Exit 0 when no case is slower and every case had enough pairs, 1
// otherwise, 2 on bad input.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("benchstat", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	conf := fs.Float64("confidence", 0.95, "family-wise confidence over all cases")
	jsonOut := fs.String("json", "", "also write the figures and verdicts to FILE")
	pool := fs.Bool("pool", false, "read bench.json files (the arguments) and pool each case's pairs")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !(*conf > 0 && *conf < 1) {
		fmt.Fprintf(stderr, "benchstat: --confidence %g: want a probability between 0 and 1\n", *conf)
		return 2
	}
	var cases []Case
	var err error
	if *pool {
		cases, err = poolFiles(fs.Args())
	} else {
		cases, err = readPairs(stdin)
	}
	if err != nil {
		fmt.Fprintf(stderr, "benchstat: %v\n", err)
		return 2
	}
	rep, err := newReport(cases, *conf)
	if err != nil {
		fmt.Fprintf(stderr, "benchstat: %v\n", err)
		return 2
	}
	rep.writeText(stdout)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rep.doc(), "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintf(stderr, "benchstat: %v\n", err)
			return 2
		}
	}
	if !rep.ok() {
		return 1
	}
	return 0
}

// readPairs reads bench.sh's lines.
func readPairs(r io.Reader) ([]Case, error) {
	var cases []Case
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		f := strings.Split(text, "\t")
		if len(f) != 5 && len(f) != 6 {
			return nil, fmt.Errorf("line %d: %d fields, want 5 (name, higher|lower, unit, perftest's figures, rdmabench's) and an optional target ratio", line, len(f))
		}
		c := Case{Name: f[0], Unit: f[2]}
		if len(f) == 6 {
			t, err := strconv.ParseFloat(strings.TrimSpace(f[5]), 64)
			if err != nil || !(t > 0) || math.IsInf(t, 0) {
				return nil, fmt.Errorf("line %d (%s): target %q: want a ratio above 0", line, f[0], f[5])
			}
			c.Target = t
		}
		switch f[1] {
		case "higher":
			c.Better = Higher
		case "lower":
			c.Better = Lower
		default:
			return nil, fmt.Errorf("line %d: %q: want higher or lower", line, f[1])
		}
		c.Perftest, c.Rdmabench = figures(f[3]), figures(f[4])
		if len(c.Perftest) != len(c.Rdmabench) {
			return nil, fmt.Errorf("line %d (%s): %d perftest runs, %d rdmabench runs", line, c.Name, len(c.Perftest), len(c.Rdmabench))
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("no cases in the input")
	}
	return cases, nil
}

// figures reads "1.5,2,," (a run without a figure is NaN).
func figures(s string) []float64 {
	var out []float64
	for _, v := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsInf(x, 0) {
			x = math.NaN()
		}
		out = append(out, x)
	}
	return out
}

// report is every case's summary at the per-case confidence.
type report struct {
	conf, perCase float64
	cases         []Case
	sums          []Summary
}

func newReport(cases []Case, conf float64) (*report, error) {
	r := &report{conf: conf, perCase: 1 - (1-conf)/float64(len(cases)), cases: cases}
	for _, c := range cases {
		s, err := Summarize(c, r.perCase)
		if err != nil {
			return nil, err
		}
		r.sums = append(r.sums, s)
	}
	return r, nil
}

func (r *report) ok() bool {
	for _, s := range r.sums {
		if s.Verdict == Slower || s.Verdict == TooFew {
			return false
		}
	}
	return true
}

func (r *report) writeText(w io.Writer) {
	fmt.Fprintf(w, "bench: %d cases at %g%% family-wise (Bonferroni: each interval at %.2f%%, distribution-free on the median of the per-pair ratios rdmabench/perftest, or rdmabench/the baseline a case names; it needs %d pairs)\n",
		len(r.cases), 100*r.conf, 100*r.perCase, MinPairs(r.perCase))
	nameW := 4
	for _, c := range r.cases {
		nameW = max(nameW, len(c.Name))
	}
	fmt.Fprintf(w, "%-*s  %-12s  %6s  %-17s  %s\n", nameW, "case", "pairs", "median", "interval", "verdict")
	for i, c := range r.cases {
		s := r.sums[i]
		pairs := strconv.Itoa(s.Pairs)
		if s.Lost > 0 {
			pairs += fmt.Sprintf(" (%d lost)", s.Lost)
		}
		v := s.Verdict.String()
		switch s.Verdict {
		case Level:
			v = fmt.Sprintf("level within ±%.1f%%", 100*s.HalfWidth)
		case TooFew:
			v = fmt.Sprintf("too few pairs (%d; [min, max] covers %.1f%%)", s.Pairs, 100*s.Coverage)
		}
		if t := c.target(); t != 1 {
			switch s.Verdict {
			case Faster:
				v = fmt.Sprintf("better than target %g", t)
			case Slower:
				v = fmt.Sprintf("worse than target %g", t)
			case Level:
				v = fmt.Sprintf("level with target %g within ±%.1f%%", t, 100*s.HalfWidth)
			}
		}
		fmt.Fprintf(w, "%-*s  %-12s  %6.3f  [%6.3f, %6.3f]  %s (%s is better)\n", nameW, c.Name, pairs, s.Median, s.Lo, s.Hi, v, c.Better)
	}
}

// The JSON document: every figure, so that benches pool (--pool).
type docCase struct {
	Name      string     `json:"name"`
	Unit      string     `json:"unit,omitempty"`
	Better    string     `json:"better"`
	Target    float64    `json:"target,omitempty"` // the ratio held to; absent: 1
	Perftest  []*float64 `json:"perftest"`
	Rdmabench []*float64 `json:"rdmabench"`
	Pairs     int        `json:"pairs"`
	Median    float64    `json:"median"`
	Interval  [2]float64 `json:"interval"`
	Coverage  float64    `json:"coverage"`
	Verdict   string     `json:"verdict"`
	HalfWidth float64    `json:"half_width"`
}

type doc struct {
	Schema            int       `json:"schema"`
	Confidence        float64   `json:"confidence"`
	PerCaseConfidence float64   `json:"per_case_confidence"`
	Cases             []docCase `json:"cases"`
}

func nullable(xs []float64) []*float64 {
	out := make([]*float64, len(xs))
	for i, x := range xs {
		if !math.IsNaN(x) {
			out[i] = &x
		}
	}
	return out
}

func unnull(xs []*float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = math.NaN()
		if x != nil {
			out[i] = *x
		}
	}
	return out
}

func (r *report) doc() doc {
	d := doc{Schema: 1, Confidence: r.conf, PerCaseConfidence: r.perCase}
	for i, c := range r.cases {
		s := r.sums[i]
		d.Cases = append(d.Cases, docCase{Name: c.Name, Unit: c.Unit, Better: c.Better.String(), Target: c.Target, Perftest: nullable(c.Perftest), Rdmabench: nullable(c.Rdmabench),
			Pairs: s.Pairs, Median: s.Median, Interval: [2]float64{s.Lo, s.Hi}, Coverage: s.Coverage, Verdict: s.Verdict.String(), HalfWidth: s.HalfWidth})
	}
	return d
}

// poolFiles joins the cases of several bench.json files by name, in the
// first file's order.
func poolFiles(paths []string) ([]Case, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("--pool: name the bench.json files")
	}
	var cases []Case
	index := map[string]int{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var d doc
		if err := json.Unmarshal(b, &d); err != nil || d.Schema != 1 {
			return nil, fmt.Errorf("%s: not a benchstat document (schema 1): %v", p, err)
		}
		for _, dc := range d.Cases {
			better := Higher
			if dc.Better == "lower" {
				better = Lower
			}
			i, seen := index[dc.Name]
			if !seen {
				index[dc.Name] = len(cases)
				cases = append(cases, Case{Name: dc.Name, Unit: dc.Unit, Better: better, Target: dc.Target})
				i = len(cases) - 1
			} else if cases[i].Better != better {
				return nil, fmt.Errorf("%s: case %q is %s-is-better here, %s before", p, dc.Name, better, cases[i].Better)
			} else if cases[i].target() != (Case{Target: dc.Target}).target() {
				return nil, fmt.Errorf("%s: case %q is held to %g here, %g before", p, dc.Name, (Case{Target: dc.Target}).target(), cases[i].target())
			}
			if len(dc.Perftest) != len(dc.Rdmabench) {
				return nil, fmt.Errorf("%s: case %q has %d perftest and %d rdmabench figures", p, dc.Name, len(dc.Perftest), len(dc.Rdmabench))
			}
			cases[i].Perftest = append(cases[i].Perftest, unnull(dc.Perftest)...)
			cases[i].Rdmabench = append(cases[i].Rdmabench, unnull(dc.Rdmabench)...)
		}
	}
	return cases, nil
}
