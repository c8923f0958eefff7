package mesh

import "github.com/rdmabench/rdmabench/results"

// dirTable holds one value per direction of a mesh of n ranks in a slice
// of n×n, where maps held them: a 1000-rank mesh has a million
// directions, looked up tens of millions of times in one analysis, and
// the maps' hashing was most of its time.
type dirTable[T any] struct {
	n     int
	v     []T
	has   []bool
	count int // directions held
}

func newDirTable[T any](n int) *dirTable[T] {
	return &dirTable[T]{n: n, v: make([]T, n*n), has: make([]bool, n*n)}
}

func (t *dirTable[T]) index(d Direction) (int, bool) {
	if d.From < 0 || d.To < 0 || d.From >= t.n || d.To >= t.n {
		return 0, false
	}
	return d.From*t.n + d.To, true
}

// at is direction d's value, if held.
func (t *dirTable[T]) at(d Direction) (T, bool) {
	i, ok := t.index(d)
	if !ok || !t.has[i] {
		var zero T
		return zero, false
	}
	return t.v[i], true
}

// put holds v for d (the mesh's checks keep ranks in range: results
// refuses a pair beyond them).
func (t *dirTable[T]) put(d Direction, v T) {
	i, ok := t.index(d)
	if !ok {
		return
	}
	if !t.has[i] {
		t.has[i], t.count = true, t.count+1
	}
	t.v[i] = v
}

// each calls f for every direction held, by rank.
func (t *dirTable[T]) each(f func(d Direction, v T)) {
	for i, ok := range t.has {
		if ok {
			f(Direction{From: i / t.n, To: i % t.n}, t.v[i])
		}
	}
}

// pairTable is the mesh's directions as a dirTable: the last pair of
// each direction.
func pairTable(pairs []results.MeshPair, n int) *dirTable[*results.MeshPair] {
	t := newDirTable[*results.MeshPair](n)
	for i := range pairs {
		p := &pairs[i]
		t.put(Direction{From: p.From, To: p.To}, p)
	}
	return t
}

// get is direction d's pair, nil where none.
func (t *dirTable[T]) get(d Direction) T {
	v, _ := t.at(d)
	return v
}
