package verbs

/*
#include "shim.h"
#include <fcntl.h>

// rb_set_nonblock makes a completion channel's fd non-blocking, so that
// ibv_get_cq_event returns EAGAIN instead of sleeping in the kernel where
// no deadline reaches it: the waiter polls the fd with its own timeout.
static inline int rb_set_nonblock(int fd) {
	int flags = fcntl(fd, F_GETFL);
	if (flags < 0)
		return errno;
	return fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ? errno : 0;
}

// rb_get_event takes one event off the channel and acknowledges it at
// once (a CQ cannot be destroyed with events unacknowledged). It returns
// 0 with *got 1 for an event, 0 with *got 0 when none is pending.
static inline int rb_get_event(struct ibv_comp_channel *ch, int *got) {
	struct ibv_cq *cq;
	void *cq_ctx;
	*got = 0;
	if (ibv_get_cq_event(ch, &cq, &cq_ctx) != 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : (errno ? errno : EIO);
	ibv_ack_cq_events(cq, 1);
	*got = 1;
	return 0;
}
*/
import "C"

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// CompChannel is a completion channel: a file descriptor that becomes
// readable when a CQ armed with RequestNotify gets a completion. It lets a
// daemon sleep between completions instead of spinning on ibv_poll_cq; the
// measurement loops in csrc/ poll and never use one.
type CompChannel struct {
	res resource
	ch  *C.struct_ibv_comp_channel
}

// CreateCompChannel makes a completion channel on the device, its fd
// non-blocking.
func (c *Context) CreateCompChannel() (*CompChannel, error) {
	if c.res.isClosed() {
		return nil, ErrClosed
	}
	ch, err := C.ibv_create_comp_channel(c.ctx)
	if ch == nil {
		return nil, verbErr("ibv_create_comp_channel", c.name, err)
	}
	if rc := C.rb_set_nonblock(ch.fd); rc != 0 {
		C.ibv_destroy_comp_channel(ch)
		return nil, rcErr("fcntl(O_NONBLOCK)", "completion channel", rc)
	}
	cc := &CompChannel{ch: ch}
	cc.res.init("comp_channel", func() error {
		return rcErr("ibv_destroy_comp_channel", "", C.ibv_destroy_comp_channel(ch))
	}, &c.res)
	return cc, nil
}

// Close destroys the channel after the CQs that use it.
func (cc *CompChannel) Close() error { return cc.res.close() }

// CreateCQWithChannel makes a CQ whose completions, once armed with
// RequestNotify, raise an event on ch.
func (c *Context) CreateCQWithChannel(entries int, ch *CompChannel) (*CQ, error) {
	if ch == nil {
		return nil, fmt.Errorf("create CQ: no completion channel")
	}
	return c.createCQ(entries, ch)
}

// RequestNotify arms the CQ: its next completion raises one event on its
// channel. Poll the CQ after arming, or a completion that came between the
// last poll and the arming is never announced.
func (q *CQ) RequestNotify() error {
	if q.res.isClosed() {
		return ErrClosed
	}
	return rcErr("ibv_req_notify_cq", "", C.ibv_req_notify_cq(q.cq, 0))
}

// Wait waits up to timeout for an event on the channel and takes it; it
// says whether one came. The CQ must be re-armed and polled after an
// event.
func (cc *CompChannel) Wait(timeout time.Duration) (bool, error) {
	if cc.res.isClosed() {
		return false, ErrClosed
	}
	fds := []unix.PollFd{{Fd: int32(cc.ch.fd), Events: unix.POLLIN}}
	ms := int(timeout / time.Millisecond)
	if timeout > 0 && ms == 0 {
		ms = 1
	}
	for {
		n, err := unix.Poll(fds, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("poll on the completion channel: %w", err)
		}
		if n == 0 {
			return false, nil
		}
		break
	}
	var got C.int
	if rc := C.rb_get_event(cc.ch, &got); rc != 0 {
		return false, rcErr("ibv_get_cq_event", "", rc)
	}
	return got == 1, nil
}
