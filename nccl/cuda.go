package nccl

import (
	"errors"
	"time"

	"github.com/rdmabench/rdmabench/internal/cudart"
)

// The CUDA runtime calls ncclbench makes, through internal/cudart, on the
// calling thread's current device: the runner pins its threads and calls
// SetDevice first.

// cudaErr is err with the GPU left out of its message, as nccl's errors
// have always read (only DeviceName's call names a GPU). cudart's errors
// come unwrapped: the copy replaces err whole.
func cudaErr(err error) error {
	var e *cudart.Error
	if errors.As(err, &e) && e.Device >= 0 {
		c := *e
		c.Device = int(cudart.Current)
		return &c
	}
	return err
}

func (l *Lib) DeviceCount() (int, error) {
	n, err := cudart.DeviceCount()
	return n, cudaErr(err)
}

func (l *Lib) SetDevice(d int) error { return cudaErr(cudart.SetDevice(d)) }

func (l *Lib) Malloc(n int) (DevPtr, error) {
	p, err := cudart.Current.Malloc(n)
	return DevPtr(p), cudaErr(err)
}

func (l *Lib) Free(p DevPtr) error { return cudaErr(cudart.Current.Free(uintptr(p))) }

func (l *Lib) MemcpyH2D(dst DevPtr, src []byte) error {
	return cudaErr(cudart.Current.MemcpyH2D(uintptr(dst), src))
}

func (l *Lib) MemcpyD2H(dst []byte, src DevPtr) error {
	return cudaErr(cudart.Current.MemcpyD2H(dst, uintptr(src)))
}

func (l *Lib) Memset(p DevPtr, v byte, n int) error {
	return cudaErr(cudart.Current.Memset(uintptr(p), v, n))
}

func (l *Lib) StreamCreate() (Stream, error) {
	s, err := cudart.StreamCreate()
	return Stream(s), cudaErr(err)
}

func (l *Lib) StreamDestroy(s Stream) error { return cudaErr(cudart.StreamDestroy(uintptr(s))) }

// StreamDone polls a stream without blocking, so waits can have deadlines.
func (l *Lib) StreamDone(s Stream) (bool, error) {
	done, err := cudart.StreamDone(uintptr(s))
	return done, cudaErr(err)
}

func (l *Lib) StreamSynchronize(s Stream) error {
	return cudaErr(cudart.StreamSynchronize(uintptr(s)))
}

// Graph is a cudaGraph_t a stream capture recorded, GraphExec its
// executable form (-G).
type (
	Graph     uintptr
	GraphExec uintptr
)

// StreamBeginCapture starts recording s's work into a graph instead of
// running it.
func (l *Lib) StreamBeginCapture(s Stream) error {
	return cudaErr(cudart.StreamBeginCapture(uintptr(s)))
}

// StreamEndCapture ends the recording and returns the graph.
func (l *Lib) StreamEndCapture(s Stream) (Graph, error) {
	g, err := cudart.StreamEndCapture(uintptr(s))
	return Graph(g), cudaErr(err)
}

// GraphInstantiate makes g executable (cudaGraphInstantiateWithFlags).
func (l *Lib) GraphInstantiate(g Graph) (GraphExec, error) {
	e, err := cudart.GraphInstantiate(uintptr(g))
	return GraphExec(e), cudaErr(err)
}

// GraphLaunch queues the graph's work on s.
func (l *Lib) GraphLaunch(e GraphExec, s Stream) error {
	return cudaErr(cudart.GraphLaunch(uintptr(e), uintptr(s)))
}

// GraphDestroy frees an executable graph and its graph.
func (l *Lib) GraphDestroy(e GraphExec, g Graph) error {
	err := cudart.GraphExecDestroy(uintptr(e))
	if gerr := cudart.GraphDestroy(uintptr(g)); err == nil {
		err = gerr
	}
	return cudaErr(err)
}

// Event is a cudaEvent_t: a mark in a stream that completes, with a time,
// when the work queued before it has.
type Event uintptr

func (l *Lib) EventCreate() (Event, error) {
	e, err := cudart.EventCreate()
	return Event(e), cudaErr(err)
}

func (l *Lib) EventDestroy(e Event) error { return cudaErr(cudart.EventDestroy(uintptr(e))) }

func (l *Lib) EventRecord(e Event, s Stream) error {
	return cudaErr(cudart.EventRecord(uintptr(e), uintptr(s)))
}

// EventElapsed is the time from a to b, both completed.
func (l *Lib) EventElapsed(a, b Event) (time.Duration, error) {
	d, err := cudart.EventElapsed(uintptr(a), uintptr(b))
	return d, cudaErr(err)
}

// RuntimeVersion and DriverVersion are the CUDA version codes (12040 for
// 12.4), 0 when unknown.
func (l *Lib) RuntimeVersion() int { return cudart.RuntimeVersion() }
func (l *Lib) DriverVersion() int  { return cudart.DriverVersion() }

// DeviceName is dev's product name ("unknown" when the runtime cannot say).
func (l *Lib) DeviceName(dev int) (string, error) {
	name, err := cudart.DeviceName(dev)
	return name, cudaErr(err)
}

// PCIBusID is dev's PCI bus id, "" when the runtime cannot say.
func (l *Lib) PCIBusID(dev int) string {
	id, err := cudart.PCIBusID(dev)
	if err != nil {
		return ""
	}
	return id
}
