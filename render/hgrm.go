package render

import (
	"io"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Hgrm writes the HdrHistogram percentile distribution (.hgrm) with values
// in microseconds (the histogram holds nanoseconds), the format
// HdrHistogram's plotter reads.
func Hgrm(w io.Writer, h *hdrhistogram.Histogram) error {
	_, err := h.PercentilesPrint(w, 5, 1e3)
	return err
}
