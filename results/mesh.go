package results

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/rdmabench/rdmabench/internal/version"
	"github.com/rdmabench/rdmabench/rdmasys"
)

// MeshKind marks a mesh document (rdmabench mesh --json, --save); a run
// document has no kind. MeshSchema is its version.
const (
	MeshKind = "rdmabench-mesh"
	// Schema 2: the noise model (spreads, sigmas, inconclusive directions),
	// culprits with their failed pairs and ratio, links with their way and
	// whether they failed. Schema 3: the ranks' PCI root and NUMA node,
	// culprits told apart as a NIC, a node or a host (with their latency
	// ratio), the hosts blamed. Schema 4: each pair's class (same NIC,
	// same host, same rail, across rails, across hosts) and the directions
	// not judged for want of another pair of their class. Schemas 1 to 3
	// still read (their pairs' classes are computed again from the ranks).
	MeshSchema = 4
	// MeshQuickSchema is a mesh measured in quick mode (its Quick verdict);
	// a full mesh still writes MeshSchema, so that its documents do not
	// change. Readers read both.
	MeshQuickSchema = 5
)

// Mesh is an all-pairs run: every rank's inventory, each directed
// measurement, the outliers and what they point at.
type Mesh struct {
	Kind   string `json:"kind"`
	Schema int    `json:"schema"`
	// Launcher is where the ranks came from (Open MPI, Slurm, torchrun...).
	Launcher string     `json:"launcher"`
	Ranks    []MeshRank `json:"ranks"`
	// What each directed measurement ran: write-bw at BWSize for
	// BWDurationS, send-lat at LatSize LatIters times.
	BWSize      int     `json:"bw_size"`
	LatSize     int     `json:"lat_size"`
	BWDurationS float64 `json:"bw_duration_s"`
	LatIters    uint64  `json:"lat_iters"`
	// Screen is the screening pass of --screen: the rounds measured both
	// directions of each pair at once, this short; the retests ran at
	// full length (BWDurationS, LatIters). Nil: every direction full.
	Screen *MeshScreen `json:"screen,omitempty"`
	Rounds int         `json:"rounds"`
	// Outlier rules: a measurement below BWFraction of the median bandwidth
	// or above LatMultiple of the median latency.
	BWFraction  float64 `json:"bw_fraction"`
	LatMultiple float64 `json:"lat_multiple"`
	MedianBW    float64 `json:"median_bw_gbps"`
	MedianLat   float64 `json:"median_lat_p50_us"`
	// The noise model: SpreadBW and SpreadLat are the relative spread (a
	// standard deviation, 0.03 = 3%) of one measurement on this fabric, from
	// the two directions of each pair; a direction is an outlier only beyond
	// Sigmas spreads (more on a large mesh: about 0.1 outliers by noise in
	// all) and beyond the fraction or multiple above. 0: too few pairs to
	// tell.
	SpreadBW  float64 `json:"spread_bw,omitempty"`
	SpreadLat float64 `json:"spread_lat,omitempty"`
	Sigmas    float64 `json:"sigmas,omitempty"`
	// ExpectBW is the fabric's expected bandwidth (--expect-bw), the
	// reference of every direction when given.
	ExpectBW float64 `json:"expect_bw_gbps,omitempty"`
	// Pairs holds one entry per direction measured (or meant to be).
	Pairs      []MeshPair `json:"pairs"`
	Mismatches []Mismatch `json:"mismatches,omitempty"`
	Culprits   []Culprit  `json:"culprits,omitempty"`
	// Hosts are the hosts blamed as a whole: more than one of their NICs
	// a culprit (CPU, memory, PCIe or the host's software), not one NIC.
	Hosts []SuspectHost `json:"hosts,omitempty"`
	Links []SuspectLink `json:"links,omitempty"`
	// Inconclusive lists the outliers that neither a culprit nor a link
	// explains and that no retest cleared: not blamed, not healthy either.
	Inconclusive []Direction `json:"inconclusive,omitempty"`
	// NotJudged lists the directions that no other pair of their class
	// at either rank could be compared with (a mesh of 2 hosts of 2 NICs:
	// each rank has one same-rail pair): neither outliers nor blamed.
	NotJudged []Direction `json:"not_judged,omitempty"`
	// LoneLatency counts the latency outliers of one direction alone (its
	// bandwidth and its reverse's latency fine): a ping-pong crosses its
	// path both ways, so a slow path slows both directions; one alone is
	// a stall of the host. Neither retested nor blamed.
	LoneLatency int `json:"lone_latency_outliers,omitempty"`
	// NotRetested counts outliers beyond --max-retests: inconclusive unless
	// a culprit explains them.
	NotRetested int     `json:"outliers_not_retested,omitempty"`
	ElapsedS    float64 `json:"elapsed_s"`
	Error       string  `json:"error,omitempty"`
	// Quick is the verdict of a mesh measured in quick mode (schema 5);
	// nil for a full mesh.
	Quick *MeshQuick `json:"quick,omitempty"`
	// Version is rank 0's rdmabench and libibverbs.
	Version *version.Info `json:"version,omitempty"`
}

// MeshScreen is what the rounds of a screened mesh ran.
type MeshScreen struct {
	BWDurationS float64 `json:"bw_duration_s"`
	LatIters    uint64  `json:"lat_iters"`
	// RetestBW and RetestLat are how the controls' retests compare with
	// their screening figures (medians of the ratios: 1.9 when a direction
	// alone gets nearly twice what it got beside its reverse); the
	// outliers' retests are divided by them before they are judged. 0:
	// fewer than three controls measured, no correction.
	RetestBW  float64 `json:"retest_bw_ratio,omitempty"`
	RetestLat float64 `json:"retest_lat_ratio,omitempty"`
}

// MeshRank is one process of the mesh and the port it measured with. Its
// port fields are the saved document's view of rdmasys.Port, filled by
// NewMeshRank alone: they stay fields of their own rather than an embedded
// Port because the document names only these few, under these names, with
// the firmware among them (mesh --analyze reads them back).
type MeshRank struct {
	Rank      int               `json:"rank"`
	Host      string            `json:"host"`
	Addr      string            `json:"addr"` // where the others reached its server
	Device    string            `json:"device"`
	Port      int               `json:"port"`
	FWVer     string            `json:"fw_ver,omitempty"`
	RateGbps  float64           `json:"rate_gbps"`
	ActiveMTU int               `json:"active_mtu"`
	LinkLayer rdmasys.LinkLayer `json:"link_layer,omitempty"`
	GIDIndex  int               `json:"gid_index"` // -1: LID routing (InfiniBand)
	// PCIRoot is the PCI root complex above the device (pci0000:00), and
	// NUMANode its NUMA node, where the host shows them (not for software
	// devices): ranks of one host under one root share its PCIe bandwidth.
	PCIRoot  string `json:"pci_root,omitempty"`
	NUMANode *int   `json:"numa_node,omitempty"`
	// Dead says why the rank left the mesh, and DeadRound when (0: before
	// the first round; Rounds+1: during the retests).
	Dead      string `json:"dead,omitempty"`
	DeadRound int    `json:"dead_round,omitempty"`
}

// NewMeshRank is a rank's entry for the port it measures with, fwVer being
// its device's firmware and gidIndex the GID index it connects with (-1:
// LID routing); Rank, Host, Addr and Dead are the mesh's to fill.
func NewMeshRank(p rdmasys.Port, fwVer string, gidIndex int) MeshRank {
	return MeshRank{Device: p.Device, Port: p.Number, FWVer: fwVer, RateGbps: p.RateGbps,
		ActiveMTU: p.ActiveMTU, LinkLayer: p.LinkLayer, GIDIndex: gidIndex}
}

// MeshPair is one direction of a pair: From ran the client (it wrote to
// To, and led the ping-pong), To served.
type MeshPair struct {
	From  int `json:"from"`
	To    int `json:"to"`
	Round int `json:"round"` // from 1
	// Class is what lies between the two ranks (the same NIC, the same
	// host, a rail...): a direction is judged only against pairs of its
	// own class. Zero (omitted): not classified (a document before
	// schema 4).
	Class PairClass `json:"class,omitempty"`
	// The first measurement's figures; SlowBW and SlowLat mark an outlier.
	MeshFigures
	// Retest is an outlier measured again alone.
	Retest *MeshFigures `json:"retest,omitempty"`
	// Control: a healthy direction of a screened mesh retested too, so
	// that the retests (alone, at full length) are judged against
	// directions measured the same way.
	Control bool `json:"control,omitempty"`
}

// MeshFigures are one measurement of a direction, or why it failed, and
// whether it is an outlier.
type MeshFigures struct {
	BWGbps   float64 `json:"bw_gbps,omitempty"`
	LatP50us float64 `json:"lat_p50_us,omitempty"`
	LatP99us float64 `json:"lat_p99_us,omitempty"`
	Error    string  `json:"error,omitempty"`
	SlowBW   bool    `json:"slow_bw,omitempty"`
	SlowLat  bool    `json:"slow_lat,omitempty"`
	// Interrupted: the measurement was ended by Ctrl-C, not failed.
	Interrupted bool `json:"interrupted,omitempty"`
	// Idle: nothing completed in the measured interval (a dead path, or
	// a client without CPU for it): a dead path only if its retest fails.
	Idle bool `json:"idle,omitempty"`
	// Tries: a retest's latency measured this many times, the best kept
	// (a stall only raises a latency); 0 or 1: once.
	Tries int `json:"tries,omitempty"`
	// Beside: a retest's write-bw was measured at once with this many
	// other retests (0: alone), disjoint ranks and NICs. Sharing only
	// slows a direction, so only a figure fine beside others is kept so.
	Beside int `json:"beside,omitempty"`
}

// Measured says whether the pair has figures.
func (p MeshPair) Measured() bool { return p.Error == "" && p.BWGbps > 0 && p.LatP50us > 0 }

// AnyMeasured says whether any direction of the mesh has its figures: a
// mesh without one (every direction failed, no pair could run) judged
// nothing.
func (m *Mesh) AnyMeasured() bool {
	for _, p := range m.Pairs {
		// A quick mesh measures write-bw alone.
		if p.Measured() || m.Quick != nil && p.Error == "" && p.BWGbps > 0 {
			return true
		}
	}
	return false
}

// Outlier says whether the first measurement was an outlier.
func (p MeshPair) Outlier() bool { return p.SlowBW || p.SlowLat }

// Bad says whether the direction stays an outlier: its retest is one too,
// or it was not retested.
func (p MeshPair) Bad() bool {
	if !p.Outlier() {
		return false
	}
	return p.Retest == nil || p.Retest.SlowBW || p.Retest.SlowLat
}

// Failed says whether the direction has no figures: it failed, and so did
// its retest (or it was not retested).
func (p MeshPair) Failed() bool {
	if p.Error == "" {
		return false
	}
	return p.Retest == nil || p.Retest.Error != "" || p.Retest.BWGbps <= 0 || p.Retest.LatP50us <= 0
}

// Mismatch is an inventory fact on which some ranks differ from the most.
type Mismatch struct {
	Fact     string `json:"fact"` // firmware, rate, MTU, GID index, link layer, device
	Majority string `json:"majority"`
	// Odd lists the ranks that differ, with their value.
	Odd []RankValue `json:"odd"`
}

// RankValue is one rank's value of a fact.
type RankValue struct {
	Rank  int    `json:"rank"`
	Value string `json:"value"`
}

// Placement fills the rank's PCI root and NUMA node from its device's
// sysfs entries under sysRoot (the sysfs mount, "/sys" on the host);
// software devices have neither.
func (r *MeshRank) Placement(sysRoot string) {
	if dir, ok, err := rdmasys.PCIDeviceDirOf(sysRoot, r.Device); err == nil && ok {
		r.PCIRoot = rdmasys.RootComplex(dir)
	}
	if n := rdmasys.DeviceNUMANode(sysRoot, r.Device); n >= 0 {
		r.NUMANode = &n
	}
}

// NIC is the rank's network device as the mesh tells devices apart: its
// host, device and port. Ranks with one NIC share it (several processes
// on one device, as make demo's mesh runs).
func (r MeshRank) NIC() string { return fmt.Sprintf("%s/%s:%d", r.Host, r.Device, r.Port) }

// CulpritKind says what a culprit rank points at.
type CulpritKind string

const (
	// CulpritNode: the rank is its host's only NIC measured, so its NIC
	// and its host cannot be told apart.
	CulpritNode CulpritKind = "node"
	// CulpritNIC: the rank's NIC, while the other NICs of its host are
	// fine.
	CulpritNIC CulpritKind = "nic"
	// CulpritHost: the rank is one of several NICs of one host that are
	// culprits: the host (see Mesh.Hosts).
	CulpritHost CulpritKind = "host"
)

// Culprit is a rank whose own pairs are slower than its partners' other
// pairs beyond the noise (figures measured alone where they were
// retested), or failed: the NIC, the node or the host, not its links.
type Culprit struct {
	Rank int `json:"rank"`
	// Kind is what it points at; "" in schema 2 documents (a node).
	Kind     CulpritKind `json:"kind,omitempty"`
	BadPairs int         `json:"bad_pairs"` // its pairs that are slow or failed
	Pairs    int         `json:"pairs"`     // its pairs measured or failed (both ranks there)
	// FailedPairs of the BadPairs failed (no figures, both ranks there).
	FailedPairs int `json:"failed_pairs,omitempty"`
	// BWRatio is its typical pair's bandwidth over its partners' other
	// pairs (0.7: 30% slower); 0 when all failed. LatRatio is the same of
	// latency (3: three times slower).
	BWRatio  float64 `json:"bw_ratio,omitempty"`
	LatRatio float64 `json:"lat_ratio,omitempty"`
	// SlowBW and SlowLat say which figure blames it (beyond the practical
	// threshold, and the noise or most of its pairs).
	SlowBW  bool `json:"slow_bw,omitempty"`
	SlowLat bool `json:"slow_lat,omitempty"`
}

// SuspectHost is a host more than one of whose NICs are culprits.
type SuspectHost struct {
	Host string `json:"host"`
	// Ranks are its culprit ranks; NICs of Total of its NICs are culprits.
	Ranks []int `json:"ranks"`
	NICs  int   `json:"nics"`
	Total int   `json:"total_nics"`
	// PCIRoot or NUMANode is set when all its culprit NICs share one.
	PCIRoot  string `json:"pci_root,omitempty"`
	NUMANode *int   `json:"numa_node,omitempty"`
}

// SuspectLink is a bad pair that no culprit explains: slower than both
// ranks' other pairs, or failed while both ranks work with the others. The
// likely cause is the path between the two (a cable, a switch port).
type SuspectLink struct {
	A int `json:"a"`
	B int `json:"b"`
	// OneWay: only A→B is bad (then A may be above B), B→A is fine: one
	// side of the path (a lane, a port's transmit side), not the whole.
	OneWay bool `json:"one_way,omitempty"`
	// Failed: the bad directions failed (a dead path), not slow.
	Failed bool `json:"failed,omitempty"`
}

// Direction is one direction of a pair.
type Direction struct {
	From int `json:"from"`
	To   int `json:"to"`
}

// maxMeshDocument bounds what DecodeMesh reads: 1000 ranks are a million
// directions of a few hundred bytes each.
const maxMeshDocument = 1 << 30

// DecodeMesh reads a mesh document.
func DecodeMesh(r io.Reader) (*Mesh, error) {
	var m Mesh
	if err := json.NewDecoder(io.LimitReader(r, maxMeshDocument)).Decode(&m); err != nil {
		return nil, fmt.Errorf("not a mesh document: %w", err)
	}
	switch {
	case m.Kind != MeshKind:
		return nil, fmt.Errorf("not a mesh document (kind %q)", m.Kind)
	case m.Schema < 1 || m.Schema > MeshQuickSchema:
		return nil, fmt.Errorf("mesh schema %d: this rdmabench reads 1 to %d", m.Schema, MeshQuickSchema)
	}
	n := len(m.Ranks)
	for _, p := range m.Pairs {
		if p.From < 0 || p.From >= n || p.To < 0 || p.To >= n || p.From == p.To {
			return nil, fmt.Errorf("mesh document: pair %d→%d outside its %d ranks", p.From, p.To, n)
		}
	}
	// Every rank the verdicts name is one of the document's: the readers
	// index the ranks by them.
	named := m.Quick.quickNamed()
	for _, c := range m.Culprits {
		named = append(named, c.Rank)
	}
	for _, l := range m.Links {
		named = append(named, l.A, l.B)
	}
	for _, d := range append(append([]Direction(nil), m.Inconclusive...), m.NotJudged...) {
		named = append(named, d.From, d.To)
	}
	for _, h := range m.Hosts {
		named = append(named, h.Ranks...)
	}
	for _, mm := range m.Mismatches {
		for _, o := range mm.Odd {
			named = append(named, o.Rank)
		}
	}
	for _, r := range named {
		if r < 0 || r >= n {
			return nil, fmt.Errorf("mesh document: its verdicts name rank %d, outside its %d ranks", r, n)
		}
	}
	return &m, nil
}

// IsMeshFile tells a mesh document from a run document by its kind field.
func IsMeshFile(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var k struct {
		Kind string `json:"kind"`
	}
	if err := json.NewDecoder(io.LimitReader(f, maxMeshDocument)).Decode(&k); err != nil {
		return false, nil // not JSON at all: the run reader says why
	}
	return k.Kind == MeshKind, nil
}

// ReadMeshFile reads a mesh document from a file.
func ReadMeshFile(path string) (*Mesh, error) { return readFile(path, DecodeMesh) }
