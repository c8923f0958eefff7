package results

import (
	"github.com/rdmabench/rdmabench/internal/version"
	"github.com/rdmabench/rdmabench/ncclog"
	"github.com/rdmabench/rdmabench/rdmasys"
)

// Doctor's document (doctor --json, written by doctor/ and read back by
// fleet, report and saved): its types live here so that what reads a
// document needs no checks to do it.

// DoctorSchema is the version of doctor's JSON document.
const DoctorSchema = 1

// DoctorDocument is doctor's stable JSON shape; bump DoctorSchema on an
// incompatible change. Host was added compatibly.
type DoctorDocument struct {
	Schema   int              `json:"schema"`
	Host     *HostFacts       `json:"host,omitempty"`
	NCCLLog  *ncclog.Analysis `json:"nccl_log,omitempty"`
	Findings []DoctorFinding  `json:"findings"`
	Summary  DoctorSummary    `json:"summary"`
	// Version is the rdmabench that wrote the document.
	Version *version.Info `json:"version,omitempty"`
}

// DoctorStatus is the verdict of one finding.
type DoctorStatus string

const (
	DoctorPass DoctorStatus = "PASS"
	DoctorWarn DoctorStatus = "WARN"
	DoctorFail DoctorStatus = "FAIL"
	DoctorInfo DoctorStatus = "INFO" // worth knowing, nothing to fix
	DoctorSkip DoctorStatus = "SKIP" // the check does not apply or could not read its input
)

// DoctorFinding is one line of doctor's report.
type DoctorFinding struct {
	Check   string       `json:"check"`             // "port.rate"
	Status  DoctorStatus `json:"status"`            // PASS, WARN, FAIL, INFO, SKIP
	Subject string       `json:"subject,omitempty"` // "mlx5_0:1", "NCCL_IB_HCA", "host"
	Value   string       `json:"value"`             // what was read
	Source  string       `json:"source,omitempty"`  // where it was read from
	Remedy  string       `json:"remedy,omitempty"`  // only for WARN and FAIL
}

// DoctorSummary counts findings by status.
type DoctorSummary struct {
	Pass int `json:"pass"`
	Warn int `json:"warn"`
	Fail int `json:"fail"`
	Info int `json:"info"`
	Skip int `json:"skip"`
}

// HostFacts are what a host is rather than what is wrong with it: versions,
// firmware, rates, MTUs, GID indexes, the NCCL environment. doctor --json
// carries them so that `rdmabench fleet` can find the node that is not like
// the others.
type HostFacts struct {
	Hostname  string            `json:"hostname"`
	Kernel    string            `json:"kernel,omitempty"`
	RDMACore  string            `json:"rdma_core,omitempty"`
	Drivers   map[string]string `json:"drivers,omitempty"` // module → version, where the module says
	GPUDriver string            `json:"gpu_driver,omitempty"`
	Peermem   bool              `json:"peermem"` // nvidia_peermem (or nv_peer_mem) loaded
	HCAs      []HCAFacts        `json:"hcas"`
	NCCLEnv   map[string]string `json:"nccl_env"`
	Sysctls   map[string]string `json:"sysctls,omitempty"`
	Time      string            `json:"time,omitempty"` // RFC 3339, UTC
	Tool      string            `json:"tool_version,omitempty"`
	// Capture is set when the report describes a captured tree rather
	// than the machine doctor ran on; NotFromCapture then names each
	// field whose value comes from that machine, and from where.
	Capture        bool              `json:"capture,omitempty"`
	NotFromCapture map[string]string `json:"not_from_capture,omitempty"`
}

// HCAFacts is one RDMA device.
type HCAFacts struct {
	Name  string      `json:"name"`
	Model string      `json:"model,omitempty"` // hca_type, "MT4129"
	FW    string      `json:"fw,omitempty"`
	PSID  string      `json:"psid,omitempty"` // board_id: mlx5 reports the PSID there
	Ports []PortFacts `json:"ports"`
}

// PortFacts is one port as doctor --json carries it and the fleet reads it
// back: the few fields of rdmasys.Port a fleet compares. They stay fields
// of their own rather than an embedded rdmasys.Port because the document
// names them its own way (rate, mtu), in its own order, and a port read
// back from it would hold only these.
type PortFacts struct {
	Port      int               `json:"port"`
	State     rdmasys.PortState `json:"state"`
	LinkLayer rdmasys.LinkLayer `json:"link_layer"`
	Rate      string            `json:"rate,omitempty"`
	RateGbps  float64           `json:"rate_gbps"`
	MTU       int               `json:"mtu,omitempty"`       // active MTU; 0 when unknown
	GIDIndex  *int              `json:"gid_index,omitempty"` // RoCE: the index NCCL uses
	Used      bool              `json:"used"`                // NCCL will use it (doctor's scope)
}
