package launch

import (
	"sync"
	"testing"
	"time"
)

// Notices added while a Flush waits, and from zero again as it returns:
// what a sync.WaitGroup refuses with a panic. Every wait ends, and none
// returns with a notice still in flight.
func TestInflightAddWhileWaiting(t *testing.T) {
	var f inflight
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for range 20000 {
			f.add()
			f.done()
		}
	}()
	go func() {
		defer wg.Done()
		for range 20000 {
			f.wait()
		}
	}()
	wg.Wait()
	f.add()
	ended := make(chan struct{})
	go func() { f.wait(); close(ended) }()
	select {
	case <-ended:
		t.Fatal("wait returned with a notice in flight")
	case <-time.After(50 * time.Millisecond):
	}
	f.done()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("wait did not end once the notice was done")
	}
}
