package mesh

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/testport"
	"github.com/rdmabench/rdmabench/launch"
)

// A rank waiting for rank 0's next task ends within a slice of Ctrl-C
// (issue 48): it waited for the mesh's whole bound.
func TestWorkInterrupted(t *testing.T) {
	addr := testport.Addr(t)
	groups := make([]*launch.Group, 2)
	var wg sync.WaitGroup
	for r := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := launch.Join(launch.Config{Addr: addr, Rank: r, Size: 2, Timeout: 5 * time.Second, KeepGoing: true, Proto: "test-mesh/1"})
			if err != nil {
				t.Error(err)
			}
			groups[r] = g
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	defer groups[0].Drop(1, "test over")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Work(ctx, groups[1], Info{ServerPort: 18001}, 5*time.Second, func(context.Context, Task) Outcome { return Outcome{} })
	}()
	GatherInfo(context.Background(), groups[0], 2, time.Now().Add(5*time.Second))
	Start(groups[0], 2, time.Hour, "") // and no task ever
	time.Sleep(300 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Work: %v, want context.Canceled", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Work still waits for a task 1 s after its context ended")
	}
}
