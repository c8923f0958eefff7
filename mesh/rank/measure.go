package rank

import (
	"context"
	"errors"
	"fmt"

	"github.com/rdmabench/rdmabench/engine"
	"github.com/rdmabench/rdmabench/inventory"
	"github.com/rdmabench/rdmabench/mesh"
	"github.com/rdmabench/rdmabench/results"
	"github.com/rdmabench/rdmabench/verbs"
)

// measure runs one direction as the client: write-bw, then send-lat, or
// the one the task's part names, over one connection to the partner's
// server (engine.Session: one dial, greeting and token for the task). The
// device and buffers are the rank's, kept across its tasks (engine.Kept);
// write-bw names send-lat to follow (ClientConfig.Also), so both ends open
// its QPs and CQs to serve send-lat too and send-lat runs on them: a
// direction sets up its QPs once.
func (r *Rank) measure(ctx context.Context, t mesh.Task) mesh.Outcome {
	var out mesh.Outcome
	sz := &r.cfg.Sizing
	var ss *engine.Session
	defer func() {
		if ss != nil {
			ss.Close()
		}
	}()
	var plans []engine.Plan
	for _, test := range []engine.Test{engine.WriteBW, engine.SendLat} {
		part := mesh.BWPart
		if test.IsLatency() {
			part = mesh.LatPart
		}
		if t.Part.Runs(part) {
			plans = append(plans, sz.Plan(test, sz.Screening(t)))
		}
	}
	for i, plan := range plans {
		test := plan.Test
		var err error
		if ss == nil {
			ss, err = engine.Dial(ctx, t.Addr, r.cfg.Token)
		}
		var run *results.Run
		if err == nil {
			run, err = ss.Run(ctx, engine.ClientConfig{Device: r.cfg.Device, Plan: plan, Also: plans[i+1:], Mode: "client"})
		}
		if err == nil && (run == nil || len(run.Results) != 1) {
			err = errors.New("no result")
		}
		if err != nil {
			out.Error = fmt.Sprintf("%s to rank %d: %v", test, t.Server, err)
			return out
		}
		res := run.Results[0]
		switch {
		case test.IsLatency() && (res.Lat == nil || res.Lat.P50 <= 0):
			out.Error = fmt.Sprintf("%s to rank %d: no latency figures", test, t.Server)
			return out
		case test.IsLatency():
			out.LatP50us, out.LatP99us = res.Lat.P50, res.Lat.P99
		case res.BWAvgGbps <= 0:
			out.Error = fmt.Sprintf("%s to rank %d: nothing completed in the measured interval (a longer -D)", test, t.Server)
			out.Idle = true
			return out
		default:
			out.BWGbps = res.BWAvgGbps
		}
	}
	return out
}

// portFacts is this rank's port as the inventory reads it.
func (r *Rank) portFacts() (results.MeshRank, error) {
	dev := r.cfg.Device.Device
	if dev == "" {
		var err error
		if dev, err = verbs.DefaultDevice(); errors.Is(err, verbs.ErrNoDevices) {
			return results.MeshRank{}, errors.New("no RDMA device on this host")
		} else if err != nil {
			return results.MeshRank{}, fmt.Errorf("no RDMA device on this host (%w)", err)
		}
	}
	devs, err := inventory.Collect([]string{dev})
	if err != nil {
		return results.MeshRank{}, err
	}
	for _, p := range devs[0].Ports {
		if p.Number != r.cfg.Device.Port {
			continue
		}
		gid := p.NCCLGIDIndex
		if r.cfg.Device.GIDIndex >= 0 {
			gid = r.cfg.Device.GIDIndex
		}
		rk := results.NewMeshRank(p.Port, devs[0].FWVer, gid)
		rk.Placement("/sys")
		return rk, nil
	}
	return results.MeshRank{}, fmt.Errorf("%s has no port %d", dev, r.cfg.Device.Port)
}
