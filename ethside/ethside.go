// Package ethside holds what the Ethernet side of a RoCE port shows: link
// speed and FEC, the NIC's counters (errors, pause and discards per
// priority), rings, coalescing and channels, PFC and the DSCP trust and
// mapping, ECN, the optical module's readings and thresholds, and the
// HCA's temperature.
//
// One model, two readers: ethside/paste parses the text outputs operators
// save (ethtool, ethtool -S/-m/--show-fec/-g/-c/-l, dcb, mlnx_qos, the
// hw_counters files, sensors) and ethside/live reads the kernel's own
// interfaces (ethtool netlink, rtnetlink DCB, hwmon). doctor judges the
// model; it never knows which reader filled it.
//
// Every part is a pointer: nil means nothing said it, which judgments
// report as SKIP, never as a fault.
package ethside

// Iface is one network interface: the netdev behind a RoCE port.
type Iface struct {
	Name    string // netdev, "eth2", "enp1s0f0np0"
	RDMADev string // the RDMA device on it where known, "mlx5_0"

	Link     *Link
	FEC      *FEC
	Counters *Counters
	Ring     *Ring
	Coalesce *Coalesce
	Channels *Channels
	Pause    *Pause
	DCB      *DCB
	Module   *Module
	HCATemp  *Sensor

	// Problems: inputs that could not be read or parsed, one line each
	// naming the file or the call ("ethtool-m.eth2.txt line 4: ...").
	Problems []string
}

// Link is `ethtool IF`: what the link trained to.
type Link struct {
	Source    string
	Up        *bool
	SpeedMbps int    // 0: unknown (link down prints "Unknown!")
	Duplex    string // "Full", "Half", ""
	// Supported/advertised speeds in Mb/s, the highest the port could do.
	SupportedMbps []int
}

// FEC is `ethtool --show-fec IF`.
type FEC struct {
	Source     string
	Active     string   // "RS", "BaseR", "Off", "None", "LLRS"
	Configured []string // "Auto", "RS", ...
}

// Counters are named counters of one reading: ethtool -S's names
// ("rx_crc_errors_phy", "rx_prio3_pause", "rx_discards_phy",
// "rx_corrected_bits_phy", "link_down_events_phy") and hw_counters' names
// ("np_ecn_marked_roce_packets", "out_of_buffer"), as the driver spells
// them. Judgments classify them by name (counters.go in doctor).
type Counters struct {
	Source string
	Values map[string]uint64
}

// AddHW adds an RDMA port's hw_counters value beside the netdev's: a name
// ethtool -S already gave is kept as "hw:"+name, so neither reading hides
// the other.
func (c *Counters) AddHW(name string, v uint64) {
	if c.Values == nil {
		c.Values = map[string]uint64{}
	}
	if _, taken := c.Values[name]; taken {
		name = "hw:" + name
	}
	c.Values[name] = v
}

// Ring is `ethtool -g IF`.
type Ring struct {
	Source       string
	RX, TX       int
	RXMax, TXMax int
}

// Coalesce is `ethtool -c IF`.
type Coalesce struct {
	Source                 string
	AdaptiveRX, AdaptiveTX *bool
	RXUsecs, TXUsecs       int
}

// Channels is `ethtool -l IF`.
type Channels struct {
	Source           string
	Combined, RX, TX int
	CombinedMax      int
	RXMax, TXMax     int
	Cores            int // online CPUs of the host, for "about half the cores"; 0 unknown
	CoresOnNICNode   int // online CPUs on the NIC's NUMA node; 0 unknown
}

// Pause is `ethtool -a IF`: global (802.3x) pause, which RoCE fabrics
// replace with PFC.
type Pause struct {
	Source  string
	Autoneg *bool
	RX, TX  *bool
}

// DCB is the data-centre bridging state: PFC per priority, the trust mode
// and the DSCP-to-priority table (`dcb pfc show`, `dcb app show`,
// `mlnx_qos -i IF`, or rtnetlink's DCB messages), and ECN per priority
// where the driver shows it (mlx5's sysfs ecn/roce_np/enable/N).
type DCB struct {
	Source     string
	PFCEnabled *[8]bool
	Trust      string      // "pcp", "dscp", "" unknown
	DSCPPrio   map[int]int // DSCP 0..63 -> priority 0..7; nil unknown
	ECN        *[8]bool    // ECN (notification point) per priority
}

// Module is `ethtool -m IF`: the optical module's digital diagnostics
// (SFF-8472/8636/CMIS), with the module's own alarm and warning
// thresholds from its EEPROM.
type Module struct {
	Source     string
	Identifier string // "QSFP28", "OSFP", "SFP"...
	Vendor     string
	Part       string
	Serial     string

	RxPowerDBm []float64 // one a lane
	TxPowerDBm []float64
	BiasMA     []float64
	TempC      *float64
	VoltageV   *float64

	RxPower, TxPower, Temp, Voltage Thresholds
	// Alarms: the module's own alarm and warning flags that are on,
	// as ethtool names them ("Laser rx power low alarm (Channel 2)").
	Alarms []string
	// NoRxLOS: the module said no lane has lost its signal (CMIS's
	// "Rx loss of signal: None"). A lane reading no light then is one the
	// module does not use: ethtool prints 8 channels for a 4-lane CMIS
	// module, the last 4 at 0 mW.
	NoRxLOS bool
}

// DarkDBm is the power kept for a lane that reads no light (0 mW,
// "-inf dBm"): -40 dBm, the 0.1 µW step of the SFF diagnostics, so that
// values stay finite and below every threshold.
const DarkDBm = -40.0

// Thresholds are a module's own limits for one reading; nil: not given.
type Thresholds struct {
	HighAlarm, HighWarn, LowWarn, LowAlarm *float64
}

// Sensor is a temperature with its device's own limits (hwmon
// temp*_input, temp*_crit, temp*_max; `sensors`).
type Sensor struct {
	Source string
	Label  string
	C      float64
	CritC  *float64
	MaxC   *float64
}

// Reader gives the interfaces as one reading. A live reader reads the
// kernel again at each call (doctor --watch calls it twice, apart, and
// judges the counters' growth); a directory of pastes gives the same each
// time, a series of them (paste.Series) its saves in turn.
type Reader interface {
	Read() ([]Iface, error)
}

// SavedReader is a Reader of outputs saved at known times apart (two
// directories of pastes): its next Read is the later save, so doctor
// --watch does not wait before it.
type SavedReader interface {
	Reader
	Saved() bool
}
