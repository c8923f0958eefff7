package engine

import (
	"github.com/rdmabench/rdmabench/proto"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/csrc"
)

// writeCounters lays out a port's counter files as sysfs does.
func writeCounters(t *testing.T, root, dir string, vals map[string]string) {
	t.Helper()
	d := filepath.Join(root, "class/infiniband/rxe0/ports/1", dir)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range vals {
		if err := os.WriteFile(filepath.Join(d, name), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPortCountersMoved(t *testing.T) {
	root := t.TempDir()
	writeCounters(t, root, "hw_counters", map[string]string{"rcvd_seq_err": "5", "sent_pkts": "100", "duplicate_request": "0", "lifespan": "10"})
	writeCounters(t, root, "counters", map[string]string{"port_xmit_data": "7", "link_downed": "0", "symbol_error": "2"})
	before := readPortCounters(root, "rxe0", 1)
	if before["rcvd_seq_err"] != 5 || before["symbol_error"] != 2 || len(before) != 6 {
		t.Fatalf("snapshot %v", before)
	}
	writeCounters(t, root, "hw_counters", map[string]string{"rcvd_seq_err": "9", "sent_pkts": "900", "duplicate_request": "3"})
	writeCounters(t, root, "counters", map[string]string{"port_xmit_data": "70", "link_downed": "1"})
	got := readPortCounters(root, "rxe0", 1).movedSince(before)
	want := map[string]uint64{"rcvd_seq_err": 4, "duplicate_request": 3, "link_downed": 1}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("moved %v, want %v (traffic counters left out)", got, want)
	}
	if m := readPortCounters(root, "rxe0", 1).movedSince(readPortCounters(root, "rxe0", 1)); m != nil {
		t.Errorf("nothing moved, got %v", m)
	}
	if m := readPortCounters(root, "nodev", 1).movedSince(before); m != nil {
		t.Errorf("a missing device moved %v", m)
	}
}

func TestPeerCountersBounded(t *testing.T) {
	big := map[string]uint64{}
	for i := 0; i <= maxCounters; i++ {
		big[string(rune('a'+i%26))+string(rune('a'+i/26))] = 1
	}
	long := map[string]uint64{string(make([]byte, maxCounterName+1)): 1}
	for _, m := range []map[string]uint64{big, long, {"": 1}} {
		if checkPeerCounters(m) == nil {
			t.Errorf("accepted %d counters", len(m))
		}
	}
	if err := checkPeerCounters(map[string]uint64{"rcvd_seq_err": 3}); err != nil {
		t.Error(err)
	}
}

// A server whose loops fail mid-run says so at once; the client's watch
// stops its loops and names the server's error.
func TestWatchPeerNamesServerError(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	stop := csrc.NewFlag()
	defer stop.Free()
	c := &clientRun{session: session{conn: proto.NewConn(a), stop: stop}}
	gone := make(chan error, 1)
	end := c.watchPeer(gone)
	go proto.NewConn(b).Send(proto.Message{Type: proto.KindError, Error: "send_lat responder: completion on QP 17: local QP operation error (status 2)"}, time.Second)
	select {
	case err := <-gone:
		if err != errPeerSpoke {
			t.Fatalf("watch: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not see the server's message")
	}
	end() // the frame is read only now, whole, by the measuring side
	if !stop.IsSet() {
		t.Error("the loops were not stopped")
	}
	if err := c.whatPeerSaid(); !strings.HasPrefix(err.Error(), "server: send_lat responder") {
		t.Errorf("error %q", err)
	}
}

func TestLossNote(t *testing.T) {
	for _, c := range []struct {
		moved map[string]uint64
		want  string
	}{
		{nil, ""},
		{map[string]uint64{"link_downed": 1, "rcvd_rnr_err": 3}, ""}, // no retransmission among them
		{map[string]uint64{"rcvd_seq_err": 212, "completer_retry_err": 264, "link_downed": 1},
			" (meanwhile this port counted completer_retry_err +264, rcvd_seq_err +212: packets were lost and sent again)"},
		{map[string]uint64{"local_ack_timeout_err": 7}, " (meanwhile this port counted local_ack_timeout_err +7: packets were lost and sent again)"},
	} {
		if got := lossNote(c.moved); got != c.want {
			t.Errorf("lossNote(%v) = %q, want %q", c.moved, got, c.want)
		}
	}
}
