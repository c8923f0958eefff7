package results

import (
	"github.com/rdmabench/rdmabench/internal/exitcode"
	"github.com/rdmabench/rdmabench/internal/version"
)

// Health's document (health --json, written by health/ and read back by
// report and saved): its types live here so that what reads a document
// needs no checks to do it.

// HealthSchema is the version of health's JSON document.
const HealthSchema = 1

// HealthReasonPrefix starts every drain reason, so that a script resumes
// only the nodes this check drained.
const HealthReasonPrefix = "rdmabench:"

// HealthDocument is health's JSON document (--json): the verdict, its exit
// status and drain reason, then the report.
type HealthDocument struct {
	Schema int    `json:"schema"`
	Status string `json:"status"`
	Exit   int    `json:"exit"`
	Reason string `json:"reason"`
	// Host is the node judged, so that a page of many nodes' documents
	// (rdmabench report) says whose verdict each is; "" in documents of
	// versions before it was recorded.
	Host string `json:"host,omitempty"`
	HealthReport
	Version *version.Info `json:"version,omitempty"`
}

// HealthReport is the whole verdict (health.Report adds its judging).
type HealthReport struct {
	Faults       []HealthFault       `json:"faults"`
	Unchecked    []HealthFault       `json:"unchecked,omitempty"`
	Measurements []HealthMeasurement `json:"measurements,omitempty"`
}

// HealthCode is a fault's stable code, "RB110": scripts and dashboards key
// on it, so a code never changes meaning (docs/health.md's table lists
// them).
type HealthCode string

// HealthFault is one reason the node is unhealthy (or, in Unchecked, one
// check that could not run).
type HealthFault struct {
	Code    HealthCode `json:"code"`
	Check   string     `json:"check"`
	Subject string     `json:"subject,omitempty"`
	Detail  string     `json:"detail"`
}

func (f HealthFault) String() string {
	s := string(f.Code)
	if f.Subject != "" {
		s += " " + f.Subject
	}
	return s + " " + f.Detail
}

// HealthMeasurement is one figure held against what it should be.
type HealthMeasurement struct {
	Check    string  `json:"check"` // bw.loopback, nccl.allreduce
	Subject  string  `json:"subject"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Expected float64 `json:"expected,omitempty"` // 0: nothing to hold it against
	Source   string  `json:"source,omitempty"`   // where Expected came from
	MinShare float64 `json:"min_share,omitempty"`
	Err      string  `json:"error,omitempty"`
}

// HealthStatus is the verdict; its value is the exit code, as every
// command's (internal/exitcode): cannot check is "could not measure", 3.
type HealthStatus int

const (
	Healthy     = HealthStatus(exitcode.OK)
	Unhealthy   = HealthStatus(exitcode.Findings)
	CannotCheck = HealthStatus(exitcode.NotMeasured)
)

func (s HealthStatus) String() string {
	switch s {
	case Healthy:
		return "healthy"
	case Unhealthy:
		return "unhealthy"
	}
	return "cannot check"
}
