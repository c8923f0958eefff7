package render

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// screen is what a terminal shows: an erase returns to the start of the
// current line and clears it.
func screen(s string) string {
	var out []byte
	for {
		i := strings.Index(s, eraseLine)
		if i < 0 {
			return string(append(out, s...))
		}
		out = append(out, s[:i]...)
		if j := bytes.LastIndexByte(out, '\n'); j >= 0 {
			out = out[:j+1]
		} else {
			out = out[:0]
		}
		s = s[i+len(eraseLine):]
	}
}

func lastLine(s string) string { return s[strings.LastIndexByte(s, '\n')+1:] }

func TestProgress(t *testing.T) {
	r := fixtureRuns()["single"]
	var plain bytes.Buffer
	tab := Table{W: &plain}
	tab.Start(r)
	for _, res := range r.Results {
		tab.Measured(r, res)
	}
	tab.End(r)

	var term bytes.Buffer
	clock := time.Unix(1000, 0)
	p := &Progress{Inner: Table{W: &term}, W: &term, Total: 4, Now: func() time.Time { return clock }}
	p.Start(r)
	if got := lastLine(screen(term.String())); got != " 0/4 measured, 0s elapsed" {
		t.Errorf("after the header: %q", got)
	}
	clock = clock.Add(10 * time.Second)
	p.Measured(r, r.Results[0])
	if got := lastLine(screen(term.String())); got != " 1/4 measured, 10s elapsed, about 30s left" {
		t.Errorf("after one row: %q", got)
	}
	clock = clock.Add(10 * time.Second)
	p.Measured(r, r.Results[1])
	if got := lastLine(screen(term.String())); got != " 2/4 measured, 20s elapsed, about 20s left" {
		t.Errorf("after two rows: %q", got)
	}
	p.End(r)
	// Once the run ends the terminal shows the table and nothing else.
	if got := screen(term.String()); got != plain.String() {
		t.Errorf("screen after the run:\n%s\nwant the table alone:\n%s", got, plain.String())
	}
}

// The mesh's progress: a line a round, then a line a retest on the
// retests' own clock.
func TestRounds(t *testing.T) {
	now := time.Unix(1000, 0)
	var b bytes.Buffer
	r := &Rounds{W: &b, Prefix: "mesh:", Now: func() time.Time { return now }}
	r.Begin()
	now = now.Add(10 * time.Second)
	r.Done(1, 4)
	now = now.Add(30 * time.Second)
	r.Done(4, 4)
	now = now.Add(6 * time.Second)
	r.Retested(1, 3)
	now = now.Add(6 * time.Second)
	r.Retested(2, 3)
	// A quick search's rounds: no time left guessed from its most.
	r.Searched(5, 36)
	want := "mesh: 1/4 rounds done, 10s elapsed, about 30s left\nmesh: 4/4 rounds done, 40s elapsed\n" +
		"mesh: 1/3 retests done, 6s elapsed, about 12s left\nmesh: 2/3 retests done, 12s elapsed, about 6s left\n" +
		"mesh: 5 rounds done, 52s elapsed (the search stops when every suspect is named or cleared; at most 36)\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
