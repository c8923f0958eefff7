package ncclog

// What one line of an NCCL log says: the host's set-up, or a verbs
// failure.

import (
	"fmt"
	"strconv"
	"strings"
)

// fact records what a line of any level says of the host's set-up (the
// version, network, NICs, channels, GPUDirect, init); false when it says
// none of these.
func (a *analyzer) fact(h *hostState, host, body string) bool {
	switch m := (submatcher{s: body}); {
	case m.match(reVersion):
		a.version(host, m.m[1])
	case m.match(reNetwork):
		h.networkRaw, h.network = m.m[1], ParseNetwork(m.m[1])
	case m.match(reIBUsing):
		for _, n := range reIBNIC.FindAllStringSubmatch(m.m[1], -1) {
			h.links[n[4]] = true
		}
	case m.match(reSockUsing):
		h.socketUsing = true
	case m.match(reBootstrap):
		h.bootstrap = strings.TrimPrefix(m.m[1], "[0]")
	case m.match(reChannel):
		h.channel(m.m[5])
	case m.match(reNoIBDevice):
		h.ibNoDevice = true
	case m.match(reNNodes):
		n, _ := strconv.Atoi(m.m[1])
		h.multiNode = h.multiNode || n > 1
		h.singleNode = h.singleNode || n == 1
	case m.match(reIBDisable):
		h.ibDisabled = m.m[1] != "0"
	case m.match(reGDRGPU):
		d := fmt.Sprintf("GPU %s / HCA %s: %s (distance %s %s %s)", m.m[2], m.m[3], strings.ToLower(m.m[1]), m.m[4], m.m[5], m.m[6])
		if m.m[1] == "Enabled" {
			h.gdrOn = append(h.gdrOn, d)
		} else {
			h.gdrOff = append(h.gdrOff, d)
		}
	case m.match(reGDRNoModule):
		h.noModule = append(h.noModule, m.m[2])
	case m.match(reGDRHCAOff):
		h.gdrOff = append(h.gdrOff, "HCA "+m.m[1]+" '"+m.m[2]+"': disabled")
	case m.match(reNICDistance):
		h.distanceNet = Network(m.m[1])
	case m.match(reInit):
		key := "comm " + m.m[1] + " rank " + m.m[2]
		if m.m[4] == "START" {
			h.initStart[key]++
		} else {
			h.initDone[key]++
		}
	default:
		return false
	}
	return true
}

// channel counts a channel's transport: NET-IB (with GPUDirect or not),
// NET-Socket, or a plugin's NET-name.
func (h *hostState) channel(transport string) {
	switch k := Kind(transport); {
	case k == "NET-IB":
		h.netIB++
		if strings.Contains(transport, "GDRDMA") {
			h.netIBGDR++
		}
	case k == "NET-Socket":
		h.netSocket++
	case strings.HasPrefix(k, "NET-"):
		h.netOther++
		h.plugin = strings.TrimPrefix(k, "NET-")
	}
}

// verbsError is a WARN line's verbs failure: a completion error, an async
// event, or a verbs call that failed. matched with a nil error: an async
// event of no meaning here, neither an error nor another warning.
func verbsError(host, body string, at where) (e *LogError, matched bool) {
	switch m := (submatcher{s: body}); {
	case m.match(reCompletion):
		status, _ := strconv.Atoi(m.m[2] + m.m[3])
		e := &LogError{Kind: ErrCompletion, Status: strconv.Itoa(status), Host: host, Line: at.String(), Text: body}
		if s, ok := wcStatuses[status]; ok {
			e.Meaning = s.name + ": " + s.meaning
		} else {
			e.Meaning = "work completion error " + e.Status
		}
		if m.m[1] != "" {
			e.Meaning += " (peer " + m.m[1] + ")"
		}
		return e, true
	case m.match(reAsyncEvent):
		meaning, ok := asyncEvents[m.m[2]]
		if !ok {
			return nil, true
		}
		if m.m[1] != "" {
			meaning = m.m[1] + ": " + meaning
		}
		return &LogError{Kind: ErrAsyncEvent, Status: m.m[2], Host: host, Line: at.String(), Text: body, Meaning: meaning}, true
	case m.match(reCallFailed):
		return &LogError{Kind: ErrVerbsCall, Status: strings.TrimSpace(m.m[2]), Host: host, Line: at.String(), Text: body,
			Meaning: m.m[1] + " failed: " + verbsCallMeaning(m.m[1], m.m[2])}, true
	}
	return nil, false
}
