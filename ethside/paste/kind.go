package paste

import (
	"sort"
	"strings"

	"github.com/rdmabench/rdmabench/ethside"
)

// Kind is which command a paste is the output of.
type Kind int

const (
	KindLink Kind = iota
	KindStats
	KindModule
	KindFEC
	KindRing
	KindCoalesce
	KindChannels
	KindPause
	KindDCBPFC
	KindDCBApp
	KindMlnxQoS
	KindHWCounters
	KindSensors
	kindCount
)

// kindByName maps the KIND of a file name to its Kind.
var kindByName = map[string]Kind{
	"ethtool":     KindLink,
	"ethtool-S":   KindStats,
	"ethtool-m":   KindModule,
	"ethtool-fec": KindFEC,
	"ethtool-g":   KindRing,
	"ethtool-c":   KindCoalesce,
	"ethtool-l":   KindChannels,
	"ethtool-a":   KindPause,
	"dcb-pfc":     KindDCBPFC,
	"dcb-app":     KindDCBApp,
	"mlnx_qos":    KindMlnxQoS,
	"hw_counters": KindHWCounters,
	"sensors":     KindSensors,
}

func kindList() string {
	names := make([]string, 0, len(kindByName))
	for n := range kindByName {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

// parsers: each fills its part of it and returns the first line it could
// not understand that matters, as "line N: ...".
var parsers = [kindCount]func(lines []string, src string, it *ethside.Iface) error{
	KindLink:       parseLink,
	KindStats:      parseStats,
	KindModule:     parseModule,
	KindFEC:        parseFEC,
	KindRing:       parseRing,
	KindCoalesce:   parseCoalesce,
	KindChannels:   parseChannels,
	KindPause:      parsePause,
	KindDCBPFC:     parseDCBPFC,
	KindDCBApp:     parseDCBApp,
	KindMlnxQoS:    parseMlnxQoS,
	KindHWCounters: parseHWCounters,
	KindSensors:    parseSensors,
}

// Parse parses text, the output of kind's command, into it, with src
// (the file name) as the part's Source. It never panics.
func Parse(kind Kind, text, src string, it *ethside.Iface) error {
	if kind < 0 || kind >= kindCount {
		return errorf(0, "unknown kind %d", int(kind))
	}
	text = strings.ReplaceAll(text, "\r\n", "\n")
	return parsers[kind](strings.Split(text, "\n"), src, it)
}
