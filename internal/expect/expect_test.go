package expect

import (
	"fmt"
	"testing"
)

// recorder is a testing.TB that keeps what Contains reports.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, a ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}

func TestContains(t *testing.T) {
	r := &recorder{TB: t}
	Contains(r, "page", "alpha beta", "alpha", "gamma", "beta", "delta")
	want := []string{"page lacks \"gamma\":\nalpha beta", "page lacks \"delta\":\nalpha beta"}
	if fmt.Sprint(r.errs) != fmt.Sprint(want) {
		t.Errorf("reported %q, want %q", r.errs, want)
	}
}
