package mesh

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/testport"
)

// A rank waiting for rank 0's next task ends within a slice of Ctrl-C
// (issue 48): it waited for the mesh's whole bound.
func TestWorkInterrupted(t *testing.T) {
	addr := testport.Addr(t)
	groups := joinRanks(t, addr, 2, 5*time.Second, "test-mesh/1", nil)
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
