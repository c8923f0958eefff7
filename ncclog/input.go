package ncclog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"strings"
	"unicode/utf8"
)

// MaxLine is the longest line read; a longer one (an application's dump
// between NCCL's lines) is skipped and counted, never held in memory whole.
const MaxLine = 1 << 20

// ErrNotLog marks input that is no NCCL log at all: empty, binary,
// compressed in a way not read here, a JSON document, or text without a
// single NCCL line. errors.Is tells a caller to exit as for bad input.
var ErrNotLog = errors.New("not an NCCL log")

// NotLogError says which file is no NCCL log, and why.
type NotLogError struct {
	Name   string // "" for one unnamed log
	Reason string
}

func (e *NotLogError) Error() string {
	if e.Name == "" {
		return "the log " + e.Reason
	}
	return e.Name + " " + e.Reason
}

func (e *NotLogError) Is(target error) bool { return target == ErrNotLog }

// fileStat is what reading one file saw, to tell whether it was a log.
type fileStat struct {
	name      string
	bytes     int64
	nccl      int    // NCCL lines
	first     []byte // the start of the first line with more than white space
	other     int    // non-NCCL lines that are findings (PyTorch's watchdog)
	gzip      bool
	firstLong int  // line number of the first over-long line
	long      int  // over-long lines skipped
	binaryish bool // the first bytes are not UTF-8 text
}

// compressed names the magic numbers of compressors a log may come in
// that are not read here.
var compressed = []struct {
	magic []byte
	name  string
	tool  string
}{
	{[]byte{0x28, 0xb5, 0x2f, 0xfd}, "zstd-compressed", "unzstd"},
	{[]byte{0xfd, '7', 'z', 'X', 'Z', 0}, "xz-compressed", "unxz"},
	{[]byte("BZh"), "bzip2-compressed", "bunzip2"},
	{[]byte{'P', 'K', 3, 4}, "a zip archive", "unzip"},
}

// open sniffs a file's first bytes: gzip is read transparently, other
// compressed or binary data is refused with a NotLogError.
func open(name string, r io.Reader, st *fileStat) (*bufio.Reader, error) {
	br := bufioReader(r)
	head, err := br.Peek(8192)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return nil, err
	}
	if len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b && !st.gzip {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, &NotLogError{name, "looks gzip-compressed but is not readable as gzip (" + err.Error() + ")"}
		}
		st.gzip = true
		return open(name, zr, st)
	}
	for _, c := range compressed {
		if bytes.HasPrefix(head, c.magic) {
			return nil, &NotLogError{name, "is " + c.name + ", not a text log: " + c.tool + " it first"}
		}
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return nil, &NotLogError{name, "is binary data (NUL bytes), not an NCCL text log"}
	}
	ctl := 0
	for _, c := range head {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != 0x1b {
			ctl++
		}
	}
	st.binaryish = ctl*100 > len(head) || !textUTF8(head)
	return br, nil
}

// lineReader reads lines of any length with memory bounded by MaxLine.
type lineReader struct {
	br   *bufio.Reader
	buf  []byte
	long bool // the last line was longer than MaxLine: only its start is in buf
	n    int64
}

// next returns the next line without its newline (the first MaxLine bytes
// only of a longer one, with long set), or io.EOF.
func (l *lineReader) next() ([]byte, error) {
	l.buf, l.long = l.buf[:0], false
	got := false
	for {
		frag, err := l.br.ReadSlice('\n')
		l.n += int64(len(frag))
		got = got || len(frag) > 0
		frag = bytes.TrimSuffix(frag, []byte("\n"))
		if len(l.buf)+len(frag) > MaxLine {
			l.long = true
			frag = frag[:MaxLine-len(l.buf)]
		}
		l.buf = append(l.buf, frag...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && !got:
			return nil, io.EOF
		case err != nil && err != io.EOF:
			return nil, err
		}
		return l.buf, nil
	}
}

// checkLog says whether each file read was an NCCL log: a file with no
// NCCL line is refused, and says what it looks like instead.
func (r *Report) checkLog() error {
	for _, f := range r.files {
		if f.nccl > 0 || f.other > 0 {
			continue
		}
		what := ""
		switch {
		case f.bytes == 0 && f.gzip:
			what = "is gzip-compressed and empty"
		case f.bytes == 0:
			what = "is empty"
		case jsonStart(f.first):
			what = "is a JSON document, not an NCCL log (analyze reads the NCCL_DEBUG=INFO log NCCL writes)"
		case f.binaryish:
			what = "is binary data, not an NCCL text log"
		default:
			what = "has no NCCL line (no \"NCCL INFO\" or \"NCCL WARN\"): was NCCL_DEBUG=INFO set?"
		}
		return &NotLogError{f.name, what}
	}
	return nil
}

// CheckLog returns a NotLogError when a file read holds no NCCL line at
// all (empty, a JSON document, other text), so that a command can refuse
// it as bad input rather than report "nothing wrong".
func (r *Report) CheckLog() error { return r.checkLog() }

// textUTF8 says whether b is UTF-8 but for a character its end may cut.
func textUTF8(b []byte) bool {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 && len(b)-i >= utf8.UTFMax {
			return false
		}
		i += size
	}
	return true
}

// jsonStart says whether a document begins as JSON does: an object, or an
// array of objects, arrays, strings or nothing ("[1,0]<stdout>:" and
// "[80746]" begin launchers' lines).
func jsonStart(b []byte) bool {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return false
	}
	if b[0] == '{' {
		return true
	}
	if b[0] != '[' {
		return false
	}
	rest := bytes.TrimSpace(b[1:])
	return len(rest) == 0 || strings.IndexByte("{[\"]", rest[0]) >= 0
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, 64*1024) }
