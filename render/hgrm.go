package render

import (
	"fmt"
	"io"
	"strings"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rdmabench/rdmabench/results"
)

// Hgrm writes the HdrHistogram percentile distribution (.hgrm) with values
// in microseconds (the histogram holds nanoseconds), the format
// HdrHistogram's plotter reads, and a last "#[" line (which readers of the
// format skip) saying what one sample is: a send-lat file holds half round
// trips, its --rate files whole ones, and a chart must not mix them.
func Hgrm(w io.Writer, h *hdrhistogram.Histogram, sample string) error {
	if _, err := h.PercentilesPrint(w, 5, 1e3); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s%s]\n", results.HgrmSamplePrefix, strings.NewReplacer("[", "(", "]", ")", "\n", " ").Replace(sample))
	return err
}
