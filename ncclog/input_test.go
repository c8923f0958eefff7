package ncclog

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const ibLine = "node1:10:10 [0] NCCL INFO Using network IB\n"

// A line over the old 4 MiB scanner bound aborted the analysis with
// "bufio.Scanner: token too long"; now it is skipped and counted, and the
// NCCL lines around it are read.
func TestParseLongLine(t *testing.T) {
	long := strings.Repeat("x", 5<<20)
	for _, tail := range []string{"\n" + ibLine, ""} {
		in := "node1:10:10 [0] NCCL INFO NCCL version 2.18.3+cuda12.2\n" + long + tail
		rep, err := ParseFiles([]Named{{Name: "big.log", R: strings.NewReader(in)}})
		if err != nil {
			t.Fatalf("tail %q: %v", tail, err)
		}
		if rep.LongLines != 1 || rep.Version != "2.18.3" {
			t.Errorf("tail %q: long lines %d, version %q", tail, rep.LongLines, rep.Version)
		}
		if tail != "" && rep.Network != NetIB {
			t.Errorf("the line after the long one was not read: network %q", rep.Network)
		}
		if !strings.Contains(strings.Join(rep.Notes, "\n"), "skipped (not NCCL's; the first at line big.log:2)") {
			t.Errorf("notes %q", rep.Notes)
		}
	}
	// A line of exactly MaxLine bytes is read whole.
	rep, err := Parse(strings.NewReader(strings.Repeat("y", MaxLine) + "\n" + ibLine))
	if err != nil || rep.LongLines != 0 || rep.Network != NetIB {
		t.Errorf("MaxLine: %v, long %d, network %q", err, rep.LongLines, rep.Network)
	}
}

// lineReader's memory stays bounded whatever the line's length.
func TestLineReaderBounded(t *testing.T) {
	lr := &lineReader{br: bufioReader(io.MultiReader(strings.NewReader(strings.Repeat("z", 3*MaxLine)), strings.NewReader("\nshort\n")))}
	l, err := lr.next()
	if err != nil || !lr.long || len(l) != MaxLine || cap(lr.buf) > 2*MaxLine {
		t.Fatalf("long line: %v, long %v, len %d, cap %d", err, lr.long, len(l), cap(lr.buf))
	}
	if l, err = lr.next(); err != nil || lr.long || string(l) != "short" {
		t.Fatalf("next: %q %v", l, err)
	}
	if _, err = lr.next(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

func TestParseGzip(t *testing.T) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	io.WriteString(zw, ibLine)
	zw.Close()
	rep, err := Parse(&b)
	if err != nil || rep.Network != NetIB || rep.CheckLog() != nil {
		t.Fatalf("gzip: %v, network %q, %v", err, rep.Network, rep.CheckLog())
	}
}

// Input that is no NCCL log is refused with a NotLogError that says what
// it is, rather than analysed as a log with nothing wrong.
func TestNotLog(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Close()
	for _, c := range []struct {
		name, in, want string
	}{
		{"empty", "", "is empty"},
		{"gzip-empty", gz.String(), "gzip-compressed and empty"},
		{"binary", "\x7fELF\x02\x01\x01\x00\x00\x00", "binary data"},
		{"binary-no-nul", strings.Repeat("\xff\xfe\x01\x02\x03", 100), "binary data"},
		{"zstd", "\x28\xb5\x2f\xfd rest", "zstd-compressed"},
		{"json", "  {\n \"schema\": 1, \"results\": []}\n", "JSON document"},
		{"json-array", "[{\"a\": 1}]", "JSON document"},
		{"text", "hello\nworld\n", "no NCCL line"},
		{"bad-gzip", "\x1f\x8b\x00\x00", "not readable as gzip"},
	} {
		rep, err := ParseFiles([]Named{{Name: c.name, R: strings.NewReader(c.in)}})
		if err == nil {
			err = rep.CheckLog()
		}
		if !errors.Is(err, ErrNotLog) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), c.name+" ") {
			t.Errorf("%s: %v, want ErrNotLog saying %q", c.name, err, c.want)
		}
	}
	// Launcher prefixes and PyTorch's watchdog alone are a log.
	for _, in := range []string{"[1,0]<stdout>:" + ibLine, "[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600060 milliseconds before timing out.\n"} {
		rep, err := Parse(strings.NewReader(in))
		if err != nil || rep.CheckLog() != nil {
			t.Errorf("%q: %v %v", in, err, rep.CheckLog())
		}
	}
}

// NCCL up to 2.3 said "Using internal Network IB|Socket", and before 2.3
// printed "INFO" without "NCCL": the fixtures are real logs' lines, their
// sources named in them.
func TestInternalNetwork(t *testing.T) {
	for _, c := range []struct {
		file      string
		network   Network
		transport string
		problems  int
	}{
		{"an-nccl23-internal-socket.log", NetSocket, "socket", 1},
		{"an-nccl22-internal-ib.log", NetIB, "ib", 0},
	} {
		f, err := os.Open(filepath.Join("..", "cmd", "ncclbench", "testdata", "badinput", "files", c.file))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Parse(f)
		f.Close()
		if err != nil || rep.CheckLog() != nil {
			t.Fatalf("%s: %v %v", c.file, err, rep.CheckLog())
		}
		if rep.Network != c.network || rep.Analysis.Transport != c.transport || len(rep.Analysis.Problems()) != c.problems {
			t.Errorf("%s: network %q transport %q problems %q", c.file, rep.Network, rep.Analysis.Transport, rep.Analysis.Problems())
		}
	}
}

// Each finding, error and unclassified WARN line counts.
func TestProblems(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"h:1:1 [0] NCCL INFO Using network IB\nh:1:1 [0] NCCL INFO nNodes 1\n", nil},
		{"h:1:1 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>\nh:1:1 [0] NCCL INFO nNodes 1\n", nil},
		{"h:1:1 [0] NCCL INFO Using network Socket\n", []string{"falls back to TCP sockets"}},
		{"h:1:1 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1234> with status=12 opcode=0 len=0 vendor err 129\n", []string{"completion error at line 1"}},
		{"h:1:1 [0] NCCL WARN something odd\nh:1:1 [0] NCCL WARN more\n", []string{"2 other NCCL WARN line(s): line 1: something odd; line 2: more"}},
	} {
		rep, err := Parse(strings.NewReader(c.in))
		if err != nil {
			t.Fatal(err)
		}
		got := rep.Analysis.Problems()
		if len(got) != len(c.want) {
			t.Errorf("%q: problems %q, want %q", c.in, got, c.want)
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%q: problem %q, want %q", c.in, got[i], w)
			}
		}
	}
}
