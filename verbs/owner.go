package verbs

import (
	"errors"
	"sort"
	"strconv"
	"sync"
)

// resource is the lifetime bookkeeping shared by every verbs object. A parent
// keeps the list of its open children; closing the parent closes them first,
// newest first, because the kernel refuses to destroy a PD that still has MRs,
// or a CQ that QPs still use. Children hold their parents by pointer, so a
// parent cannot be collected while a child is reachable.
type resource struct {
	mu       sync.Mutex
	kind     string
	closed   bool
	children []*resource
	parents  []*resource
	destroy  func() error // releases the native object; runs once
}

var live = struct {
	sync.Mutex
	byKind map[string]int
}{byKind: map[string]int{}}

// init starts tracking an object of the given kind under its parents.
func (r *resource) init(kind string, destroy func() error, parents ...*resource) {
	r.kind = kind
	r.destroy = destroy
	r.parents = parents
	for _, p := range parents {
		p.mu.Lock()
		p.children = append(p.children, r)
		p.mu.Unlock()
	}
	live.Lock()
	live.byKind[kind]++
	live.Unlock()
}

// isClosed reports whether close has run.
func (r *resource) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// close closes open children (newest first), then the object itself. It is
// idempotent; the first error wins but every child is still closed.
func (r *resource) close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	children := append([]*resource(nil), r.children...)
	r.children = nil
	r.mu.Unlock()

	var errs []error
	for i := len(children) - 1; i >= 0; i-- {
		errs = append(errs, children[i].close())
	}
	if r.destroy != nil {
		errs = append(errs, r.destroy())
	}
	for _, p := range r.parents {
		p.forget(r)
	}
	live.Lock()
	live.byKind[r.kind]--
	live.Unlock()
	return errors.Join(errs...)
}

func (r *resource) forget(child *resource) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, c := range r.children {
		if c == child {
			r.children = append(r.children[:i], r.children[i+1:]...)
			return
		}
	}
}

// LiveObjects returns how many objects of each kind are open, for leak checks
// in tests (see TestMain): every count must be zero once a test has cleaned up.
func LiveObjects() map[string]int {
	live.Lock()
	defer live.Unlock()
	out := map[string]int{}
	for k, v := range live.byKind {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// LeakReport describes open objects, or "" when none are open.
func LeakReport() string {
	m := LiveObjects()
	if len(m) == 0 {
		return ""
	}
	kinds := make([]string, 0, len(m))
	for k := range m {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	s := "open verbs objects:"
	for _, k := range kinds {
		s += " " + k + "=" + strconv.Itoa(m[k])
	}
	return s
}
