package engine

import (
	"errors"
	"sync"

	"github.com/rdmabench/rdmabench/verbs"
)

// Kept is what a process keeps open across the plans it runs, as client and
// as server (a mesh rank's tasks with all its partners): each device opened
// once with its protection domain, and registered buffers, so that a task
// costs its QPs and not a device open and a memory registration (pinning
// every page of the buffer). Sides given one in their DeviceConfig take a
// buffer of their own from it and give it back when they close, so sides
// open at once (a rank's client and server in one round) never share one.
// Close it after every side that used it has closed.
type Kept struct {
	mu     sync.Mutex
	devs   map[string]*keptDevice
	closed bool
	stats  KeptStats
}

// KeptStats counts what Kept did: devices opened, buffers registered, and
// sides that found a buffer waiting.
type KeptStats struct{ Opens, Registrations, Reuses int }

// keptFree bounds the buffers kept unused per device: a rank has at most a
// client, a server and their loads open at once, and a buffer beyond that
// is memory pinned for nothing.
const keptFree = 4

// keptDevice is one device opened for the whole of a Kept's life.
type keptDevice struct {
	ctx  *verbs.Context
	pd   *verbs.PD
	attr verbs.DeviceAttr
	free []*keptMemory
}

// keptMemory is a registered buffer and what it was made for.
type keptMemory struct {
	key   memKey
	bytes int
	mem   *sideMemory
	mr    *verbs.MR
	notes []string
}

// memKey is what a buffer must match to serve another plan: where it lives
// and the access its registration grants (a peer of a write test may
// write it; one of a send test may not).
type memKey struct {
	gpu       string
	dmabuf    bool
	node      int // -1: the NIC's
	hugePages bool
	access    verbs.Access
}

func keyFor(spec MemorySpec, access verbs.Access) memKey {
	k := memKey{gpu: spec.GPU, dmabuf: spec.Dmabuf, node: -1, hugePages: spec.HugePages, access: access}
	if spec.Node != nil {
		k.node = *spec.Node
	}
	return k
}

// ErrKeptClosed says a side asked a Kept that was already closed.
var ErrKeptClosed = errors.New("the kept device resources are closed")

// NewKept returns an empty Kept: devices open on first use.
func NewKept() *Kept { return &Kept{devs: map[string]*keptDevice{}} }

// Stats returns the counts so far.
func (k *Kept) Stats() KeptStats {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stats
}

// device returns the named device, opening it and its PD the first time.
func (k *Kept) device(name string) (*keptDevice, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, ErrKeptClosed
	}
	if d := k.devs[name]; d != nil {
		return d, nil
	}
	ctx, attr, pd, err := openWithPD(name)
	if err != nil {
		return nil, err
	}
	d := &keptDevice{ctx: ctx, attr: attr, pd: pd}
	k.devs[name] = d
	k.stats.Opens++
	return d, nil
}

// openWithPD opens the named device, reads its attributes and allocates a
// PD: what every side needs first, its own or kept. On an error nothing
// stays open.
func openWithPD(name string) (*verbs.Context, verbs.DeviceAttr, *verbs.PD, error) {
	ctx, err := verbs.Open(name)
	if err != nil {
		return nil, verbs.DeviceAttr{}, nil, err
	}
	attr, err := ctx.QueryDevice()
	var pd *verbs.PD
	if err == nil {
		pd, err = ctx.AllocPD()
	}
	if err != nil {
		ctx.Close()
		return nil, verbs.DeviceAttr{}, nil, err
	}
	return ctx, attr, pd, nil
}

// memory returns a buffer of at least size bytes for key on d: a kept one
// (the smallest that is large enough), else a new registration.
func (k *Kept) memory(d *keptDevice, size int, spec MemorySpec, access verbs.Access) (*keptMemory, error) {
	key := keyFor(spec, access)
	k.mu.Lock()
	best := -1
	for i, m := range d.free {
		if m.key == key && m.bytes >= size && (best < 0 || m.bytes < d.free[best].bytes) {
			best = i
		}
	}
	if best >= 0 {
		m := d.free[best]
		d.free = append(d.free[:best], d.free[best+1:]...)
		k.stats.Reuses++
		k.mu.Unlock()
		return m, nil
	}
	k.mu.Unlock()
	mem, mr, notes, err := allocMemory(d.pd, d.ctx.Name(), size, spec, access)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.stats.Registrations++
	k.mu.Unlock()
	return &keptMemory{key: key, bytes: size, mem: mem, mr: mr, notes: notes}, nil
}

// put gives a side's buffer back: kept while there is room and the Kept is
// open, else deregistered and freed.
func (k *Kept) put(d *keptDevice, m *keptMemory) {
	k.mu.Lock()
	if !k.closed && len(d.free) < keptFree {
		d.free = append(d.free, m)
		k.mu.Unlock()
		return
	}
	k.mu.Unlock()
	m.close()
}

func (m *keptMemory) close() {
	m.mr.Close()
	m.mem.close()
}

// Close frees the kept buffers and closes the devices. Sides still open on
// them lose their device: close those first.
func (k *Kept) Close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return
	}
	k.closed = true
	for _, d := range k.devs {
		for _, m := range d.free {
			m.close()
		}
		d.free = nil
		d.ctx.Close()
	}
}
