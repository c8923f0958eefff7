package main

// A fault's instant on node 1's clock. rxe-node carries a command to node
// 2 through the host mailbox, which a busy TCG guest answered 7-13 s after
// the call (TestTwoNodeAgent, two vCPUs a guest): the fault then happened
// somewhere in that span, and an alert's seconds from it could not be
// told. So the faults go over the link instead: a server the test starts
// on node 2 runs each command the moment it reads it.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// triggerEnv makes the test binary node 2's trigger server on that address.
const triggerEnv = "RDMABENCH_TEST_TRIGGER"

// serveTriggers runs, for each connection, the one command it sends (a
// JSON argv and a newline) and answers "rc N" and the quoted output. It
// runs until it is killed.
func serveTriggers(addr string) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "trigger: %v\n", err)
		return 1
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintf(os.Stderr, "trigger: %v\n", err)
			return 1
		}
		go runTrigger(c)
	}
}

func runTrigger(c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(io.LimitReader(c, 64<<10)).ReadBytes('\n')
	if err != nil {
		return // a dial that only checked that we listen
	}
	var argv []string
	if err := json.Unmarshal(line, &argv); err != nil || len(argv) == 0 {
		fmt.Fprintf(c, "rc 125 %q\n", "a bad request")
		return
	}
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	code := 0
	if err != nil {
		code = 125
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		out = append(out, err.Error()...)
	}
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "rc %d %s\n", code, strconv.Quote(string(out)))
}

// node2Trigger is node 2's trigger server, as node 1 reaches it.
type node2Trigger struct{ addr string }

// startTrigger starts the server on node 2 (through rxe-node, once) and
// waits until it listens.
func startTrigger(t testing.TB, addr string) *node2Trigger {
	t.Helper()
	return &node2Trigger{addr: startOnNode2(t, "the trigger server", addr, "env", triggerEnv+"="+addr, os.Args[0]).addr}
}

// fire sends argv to node 2 and returns when it was sent, on node 1's
// clock. With wait it also waits (a minute at most) for the command to
// end, and fails the test unless it exited 0; without, the connection is
// left to close (a command that takes the link down cannot answer).
func (tr *node2Trigger) fire(t testing.TB, wait bool, argv ...string) time.Time {
	t.Helper()
	c, err := net.DialTimeout("tcp", tr.addr, 5*time.Second)
	if err != nil {
		t.Fatalf("%v on node 2: %v", argv, err)
	}
	defer c.Close()
	req, _ := json.Marshal(argv)
	if _, err := c.Write(append(req, '\n')); err != nil {
		t.Fatalf("%v on node 2: %v", argv, err)
	}
	at := time.Now()
	if !wait {
		return at
	}
	c.SetReadDeadline(time.Now().Add(time.Minute))
	reply, err := bufio.NewReader(io.LimitReader(c, 1<<20)).ReadString('\n')
	if err != nil {
		t.Fatalf("%v on node 2: no answer: %v", argv, err)
	}
	var code int
	if _, err := fmt.Sscanf(reply, "rc %d", &code); err != nil {
		t.Fatalf("%v on node 2: the answer %q: %v", argv, reply, err)
	}
	if code != 0 {
		text, _ := strconv.Unquote(strings.TrimSpace(strings.TrimPrefix(reply, fmt.Sprintf("rc %d ", code))))
		t.Fatalf("%v on node 2: exit %d: %s", argv, code, text)
	}
	return at
}
