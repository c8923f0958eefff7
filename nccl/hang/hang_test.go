package hang

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestTracker(t *testing.T) {
	var tr Tracker
	tr.Enter("ncclAllReduce of 8 bytes")
	tr.Enter("ncclAllReduce of 8 bytes")
	tr.FinishAll()
	tr.Enter("ncclAllReduce of 16 bytes")
	tr.Enter("ncclAllReduce of 32 bytes")
	want := Progress{Entered: 4, Finished: 2, Pending: "ncclAllReduce of 16 bytes"}
	var got Progress
	if err := json.Unmarshal(tr.JSON(), &got); err != nil || got != want {
		t.Errorf("got %+v (%v), want %+v", got, err, want)
	}
}

func proc(r int) Proc { return Proc{Rank: r, Host: "node", Pid: 100 + r, GPUs: []int{r}} }

func live(r int, entered, finished int64, pending string) Seen {
	return Seen{Proc: proc(r), Answered: true, Progress: &Progress{Entered: entered, Finished: finished, Pending: pending}}
}

func TestVerdict(t *testing.T) {
	const ar = "ncclAllReduce of 1024 bytes"
	tests := []struct {
		name string
		seen []Seen
		want string
	}{
		{"a stopped process", []Seen{live(0, 51, 50, ar), live(1, 51, 50, ar),
			{Proc: proc(2), Progress: &Progress{Entered: 51, Finished: 50, Pending: ar}, Ago: 400 * time.Millisecond}, live(3, 51, 50, ar)},
			"timeout: collective #51 (ncclAllReduce of 1024 bytes) did not finish within 3s (-T): process rank 2 (node GPU 2, pid 102) did not answer for 3s, stopped or hung (last heard 400ms before: entered #51, finished #50); process ranks 0-1, 3 entered it and wait"},
		{"a stopped process, collectives queued", []Seen{live(0, 57, 50, ar), live(1, 56, 50, ar),
			{Proc: proc(2), Progress: &Progress{Entered: 53, Finished: 50, Pending: ar}, Ago: time.Second}},
			"timeout: collectives #51-#57 (ncclAllReduce of 1024 bytes) were not seen to finish within 3s (-T; queued, so which of them ran is not known): process rank 2 (node GPU 2, pid 102) did not answer for 3s, stopped or hung (last heard 1s before: entered #53, finished #50); process ranks 0-1 entered them and wait"},
		{"stopped before it published", []Seen{live(0, 5, 4, ar), {Proc: proc(1)}},
			"timeout: collective #5 (ncclAllReduce of 1024 bytes) did not finish within 3s (-T): process rank 1 (node GPU 1, pid 101) did not answer for 3s, stopped or hung (nothing heard from it since the rendezvous); process rank 0 entered it and wait"},
		{"a process that never entered", []Seen{live(0, 9, 8, ar), live(1, 8, 8, ""), live(2, 9, 8, ar), live(3, 9, 8, ar), live(4, 9, 8, ar)},
			"timeout: collective #9 (ncclAllReduce of 1024 bytes) did not finish within 3s (-T): process rank 1 (node GPU 1, pid 101) never entered #9 (it is at #8); process ranks 0, 2-4 entered it and wait"},
		{"stuck on every process", []Seen{live(0, 20, 3, ar), live(1, 20, 3, ar)},
			"timeout: collectives #4-#20 (ncclAllReduce of 1024 bytes) were not seen to finish within 3s (-T; queued, so which of them ran is not known): every process entered them and none saw them finish (stuck in NCCL, on a GPU or in the network)"},
		{"stuck on every process, one at a time", []Seen{live(0, 4, 3, ar), live(1, 4, 3, ar)},
			"timeout: collective #4 (ncclAllReduce of 1024 bytes) did not finish within 3s (-T): every process entered it and none saw it finish (stuck in NCCL, on a GPU or in the network)"},
		{"nobody answered", []Seen{{Proc: proc(0)}}, "timeout: a collective did not finish within 3s (-T) and no process answered"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Verdict(tc.seen, 3*time.Second, 3*time.Second); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestManyBlamed(t *testing.T) {
	var seen []Seen
	seen = append(seen, live(0, 3, 2, "x"))
	for r := 1; r <= 12; r++ {
		seen = append(seen, Seen{Proc: proc(r)})
	}
	v := Verdict(seen, time.Second, time.Second)
	if !strings.Contains(v, "; and 4 more") || strings.Count(v, "did not answer") != 8 {
		t.Errorf("verdict: %s", v)
	}
}
