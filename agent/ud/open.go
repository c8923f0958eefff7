package ud

// Opening a transport: its defaults, the port, the UD QP, its rings and
// its CQ.

import (
	"fmt"
	"time"

	"github.com/rdmabench/rdmabench/agent/wire"
	"github.com/rdmabench/rdmabench/rdmasys"
	"github.com/rdmabench/rdmabench/verbs"
)

// withDefaults fills in what cfg leaves out and checks the rest.
func withDefaults(cfg Config) (Config, error) {
	if cfg.Port == 0 {
		cfg.Port = 1
	}
	if cfg.SysRoot == "" {
		cfg.SysRoot = "/sys"
	}
	if cfg.AnswerRate <= 0 {
		return cfg, fmt.Errorf("answer rate %g: want more than 0", cfg.AnswerRate)
	}
	if cfg.Device == "" {
		name, err := verbs.DefaultDevice()
		if err != nil {
			return cfg, err
		}
		cfg.Device = name
	}
	return cfg, nil
}

// Open opens the device and brings a UD QP to RTS with its receives posted.
func Open(cfg Config) (_ *Transport, err error) {
	if cfg, err = withDefaults(cfg); err != nil {
		return nil, err
	}
	t := &Transport{cfg: cfg, answerAHs: map[ahKey]*answerAH{}, probeAHs: map[ahKey]*probeAH{}}
	if t.ctx, err = verbs.Open(cfg.Device); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			t.Close() // the buffers too: they are not the device's
		}
	}()
	if err = t.openPort(); err != nil {
		return nil, err
	}
	if err = t.openQP(); err != nil {
		return nil, err
	}
	if err = t.openRings(); err != nil {
		return nil, err
	}
	t.bucket, t.bucketAt = t.cfg.AnswerRate, time.Now()
	return t, nil
}

// openPort reads what the address record needs of the port: its LID, the
// GID entry to send from, and the device's uverbs node to watch.
func (t *Transport) openPort() (err error) {
	if uv, err := rdmasys.UverbsDevices(t.cfg.SysRoot); err == nil {
		t.uverbs = uv[t.cfg.Device]
	}
	if t.port, err = t.ctx.QueryPort(t.cfg.Port); err != nil {
		return err
	}
	t.gidIdx = t.cfg.GIDIndex
	if t.gidIdx < 0 {
		if t.gidIdx, _, err = t.ctx.DefaultGIDIndex(t.cfg.Port); err != nil {
			return err
		}
	}
	if t.gidIdx >= 0 {
		if t.gid, err = t.ctx.GID(t.cfg.Port, t.gidIdx); err != nil {
			return err
		}
	}
	return nil
}

// openQP makes the PD, the channel, the CQ and the UD QP, in RTS.
func (t *Transport) openQP() (err error) {
	if t.pd, err = t.ctx.AllocPD(); err != nil {
		return err
	}
	if t.ch, err = t.ctx.CreateCompChannel(); err != nil {
		return err
	}
	if err = t.openCQ(); err != nil {
		return err
	}
	if t.qp, err = t.pd.CreateQP(verbs.QPSpec{Type: verbs.UD, SendCQ: t.cq, RecvCQ: t.cq,
		MaxSendWR: sendSlots, MaxRecvWR: recvSlots, MaxInline: wire.Size, SignalAll: true}); err != nil {
		return err
	}
	o := verbs.DefaultConnectOptions(t.cfg.Port, t.gidIdx)
	if err = t.qp.Init(o); err != nil {
		return err
	}
	if err = t.qp.ReadyToReceive(verbs.Endpoint{}, o); err != nil {
		return err
	}
	return t.qp.ReadyToSend(o)
}

// openRings registers the receive and send rings and posts every receive.
func (t *Transport) openRings() (err error) {
	if t.recvB, err = verbs.AllocBuffer(recvSlots * slotBytes); err != nil {
		return err
	}
	if t.recvMR, err = t.pd.RegisterMR(t.recvB, verbs.AccessLocalWrite); err != nil {
		return err
	}
	if t.sendB, err = verbs.AllocBuffer(sendSlots * slotBytes); err != nil {
		return err
	}
	if t.sendMR, err = t.pd.RegisterMR(t.sendB, verbs.AccessLocalWrite); err != nil {
		return err
	}
	for i := range recvSlots {
		if err = t.postRecv(i); err != nil {
			return err
		}
	}
	for i := range sendSlots {
		t.sendFree = append(t.sendFree, i)
	}
	return nil
}

// openCQ makes the CQ: with the RNIC's completion timestamps where the
// device has them and a clock rate to read them by, else plain, timed on
// the CPU's clock.
func (t *Transport) openCQ() error {
	cq, err := t.ctx.CreateCQWithTimestamps(recvSlots+sendSlots, t.ch)
	if err == nil {
		khz, kerr := t.ctx.CoreClockKHz()
		_, rerr := t.ctx.ReadClock()
		switch {
		case kerr != nil || khz == 0:
			err = fmt.Errorf("no clock rate to read its timestamps by (%v)", kerr)
		case rerr != nil:
			err = rerr
		default:
			t.cq, t.clock, t.khz = cq, wire.ClockCQE, khz
			return nil
		}
		cq.Close()
	}
	t.note = fmt.Sprintf("no completion timestamps on %s (%v): timing on the CPU's clock", t.cfg.Device, err)
	t.clock = wire.ClockCPU
	t.cq, err = t.ctx.CreateCQWithChannel(recvSlots+sendSlots, t.ch)
	return err
}
