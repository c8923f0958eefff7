package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rdmabench/rdmabench/publish"
	"github.com/rdmabench/rdmabench/render"
	"github.com/rdmabench/rdmabench/results"
)

// writeHgrms writes one .hgrm per size and series: FILE itself for one
// size, else FILE with the size before the extension (lat.hgrm →
// lat-8.hgrm); --load's loaded series adds "-loaded" (lat-loaded.hgrm),
// each --rate series its rate, corrected and not (lat-rate1000.hgrm,
// lat-rate1000-uncorrected.hgrm).
func writeHgrms(path string, run *results.Run) error {
	ext := filepath.Ext(path)
	for _, res := range run.Results {
		if res.Hist == nil {
			continue
		}
		base := strings.TrimSuffix(path, ext)
		if len(run.Results) > 1 {
			base = fmt.Sprintf("%s-%d", base, res.Size)
		}
		if err := writeHgrm(base+ext, res.Hist, run.Latency); err != nil {
			return err
		}
		if err := writeHgrm(base+"-loaded"+ext, res.LoadedHist, run.Latency); err != nil {
			return err
		}
		for _, s := range res.Rates {
			if err := writeHgrm(fmt.Sprintf("%s-rate%d%s", base, s.Rate, ext), s.Hist, run.RateLatency); err != nil {
				return err
			}
			if err := writeHgrm(fmt.Sprintf("%s-rate%d-uncorrected%s", base, s.Rate, ext), s.UncorrectedHist, run.RateLatency); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeHgrm replaces path atomically, as --save and --metrics are: a
// plotting script never reads half a histogram.
func writeHgrm(path string, h *hdrhistogram.Histogram, sample string) error {
	if h == nil {
		return nil
	}
	return publish.WriteFileAtomic(path, func(w io.Writer) error { return render.Hgrm(w, h, sample) })
}
