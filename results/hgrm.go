package results

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Percentile is one line of an .hgrm percentile distribution.
type Percentile struct {
	Value    float64 // in the file's unit (rdmabench writes microseconds)
	Quantile float64 // 0 to 1
}

// maxHgrm bounds what ReadHgrm reads: HdrHistogram writes a few hundred
// lines; megabytes are not an .hgrm.
const maxHgrm = 16 << 20

// Hgrm is an .hgrm file's percentiles and, when rdmabench wrote it, what
// one sample is ("" from other writers).
type Hgrm struct {
	Percentiles []Percentile
	Sample      string
}

// HgrmSamplePrefix starts the "#[" line in which rdmabench says what a
// sample is (render.Hgrm writes it).
const HgrmSamplePrefix = "#[Sample (microseconds) = "

// ReadHgrm reads the percentile lines of an HdrHistogram .hgrm file (what
// --hgrm writes, and HdrHistogram's tools): "Value Percentile TotalCount
// 1/(1-Percentile)", with the header and the "#[...]" summary lines skipped
// but for rdmabench's sample line.
func ReadHgrm(r io.Reader) (*Hgrm, error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxHgrm))
	h := &Hgrm{}
	var out []Percentile
	line := 0
	for sc.Scan() {
		line++
		if s, ok := strings.CutPrefix(sc.Text(), HgrmSamplePrefix); ok {
			h.Sample = strings.TrimSuffix(s, "]")
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") || f[0] == "Value" {
			continue
		}
		// The last line's 1/(1-Percentile) is infinite: some writers print
		// "inf", others nothing.
		if len(f) != 3 && len(f) != 4 {
			return nil, fmt.Errorf("line %d: %d fields, want 4 (Value Percentile TotalCount 1/(1-Percentile))", line, len(f))
		}
		v, err1 := strconv.ParseFloat(f[0], 64)
		q, err2 := strconv.ParseFloat(f[1], 64)
		if err1 != nil || err2 != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || !(q >= 0 && q <= 1) {
			return nil, fmt.Errorf("line %d: want a value ≥ 0 and a percentile in 0..1, got %q %q", line, f[0], f[1])
		}
		out = append(out, Percentile{Value: v, Quantile: q})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no percentile lines: not an .hgrm file")
	}
	h.Percentiles = out
	return h, nil
}
