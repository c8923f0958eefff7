package doctor

import (
	"io"

	"github.com/rdmabench/rdmabench/ncclog"
)

// parseNCCLLog turns an NCCL log into the facts doctor judges, through the
// ncclog package that ncclbench shares. ncclog's own conclusions
// (Warnings) restate what checkNCCLLog judges, so only NCCL's WARN lines and
// the notes are carried over.
func parseNCCLLog(r io.Reader) (ncclFacts, error) {
	rep, err := ncclog.Parse(r)
	if err == nil {
		// Empty, binary, a JSON document, no NCCL line: bad input, not
		// a log with nothing wrong in it.
		err = rep.CheckLog()
	}
	if err != nil {
		return ncclFacts{}, err
	}
	network := rep.Network
	if network == "" && rep.Analysis != nil {
		network = rep.Analysis.Network // inferred from "NET/IB : Using"
	}
	return ncclFacts{
		Analysis:       rep.Analysis,
		Version:        rep.Version,
		Network:        network,
		GIDIndex:       rep.GIDIndex,
		GDRDMA:         rep.GDRDMA,
		SocketFallback: rep.SocketFallback,
		NetIBChannels:  rep.KindCounts()["NET-IB"],
		Warnings:       rep.NCCLWarnings,
		Notes:          rep.Notes,
	}, nil
}
