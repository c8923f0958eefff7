package nccl

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rdmabench/rdmabench/cuda"
	"github.com/rdmabench/rdmabench/internal/cudart"
)

// CudaError is cudart.Error (and cuda.Error): one type, matched by errors.As
// whichever name asks; NoDevice reads it; cudaErr keeps the message nccl's
// own CudaError always had, without a GPU.
func TestCudaErrorIsCudartError(t *testing.T) {
	raw := &cudart.Error{Call: "cudaGetDeviceProperties", Device: 3, Code: 100, Text: "no CUDA-capable device is detected"}
	err := fmt.Errorf("rank 0: %w", cudaErr(raw))
	var ce *CudaError
	if !errors.As(err, &ce) {
		t.Fatalf("errors.As(%v, *CudaError) = false", err)
	}
	var de *cuda.Error
	if !errors.As(err, &de) {
		t.Fatalf("errors.As(%v, *cuda.Error) = false", err)
	}
	if got, want := ce.Error(), "cudaGetDeviceProperties: no CUDA-capable device is detected (cudaError 100)"; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
	if raw.Device != 3 {
		t.Errorf("cudaErr changed its argument: Device = %d", raw.Device)
	}
	if !NoDevice(cudaErr(raw)) {
		t.Error("NoDevice(code 100) = false")
	}
	if NoDevice(&cudart.Error{Call: "cudaMalloc", Device: -1, Code: 2, Text: "out of memory"}) {
		t.Error("NoDevice(code 2) = true")
	}
	if cudaErr(nil) != nil {
		t.Error("cudaErr(nil) != nil")
	}
}
