package live

import (
	"golang.org/x/sys/unix"

	"github.com/rdmabench/rdmabench/ethside"
)

// Word counts and indices of the ethtool structs in linux/ethtool.h; index
// 0 is always the command.
const (
	ringWords     = 9  // struct ethtool_ringparam
	coalesceWords = 23 // struct ethtool_coalesce
	channelsWords = 9  // struct ethtool_channels
	pauseWords    = 4  // struct ethtool_pauseparam
)

// ethtool_ringparam: rx_max_pending, rx_mini_max_pending,
// rx_jumbo_max_pending, tx_max_pending, rx_pending, rx_mini_pending,
// rx_jumbo_pending, tx_pending.
func (k *kernel) ring(name string, p *problems) *ethside.Ring {
	w, err := getWords(k.fd, name, unix.ETHTOOL_GRINGPARAM, ringWords)
	if err != nil {
		note(p, "SIOCETHTOOL ETHTOOL_GRINGPARAM", name, err)
		return nil
	}
	return &ethside.Ring{Source: "SIOCETHTOOL ETHTOOL_GRINGPARAM " + name,
		RXMax: int(w[1]), TXMax: int(w[4]), RX: int(w[5]), TX: int(w[8])}
}

// ethtool_coalesce: rx_coalesce_usecs is word 1, tx_coalesce_usecs word
// 5, use_adaptive_rx_coalesce word 10, use_adaptive_tx_coalesce word 11.
func (k *kernel) coalesce(name string, p *problems) *ethside.Coalesce {
	w, err := getWords(k.fd, name, unix.ETHTOOL_GCOALESCE, coalesceWords)
	if err != nil {
		note(p, "SIOCETHTOOL ETHTOOL_GCOALESCE", name, err)
		return nil
	}
	arx, atx := w[10] != 0, w[11] != 0
	return &ethside.Coalesce{Source: "SIOCETHTOOL ETHTOOL_GCOALESCE " + name,
		RXUsecs: int(w[1]), TXUsecs: int(w[5]), AdaptiveRX: &arx, AdaptiveTX: &atx}
}

// ethtool_channels: max_rx, max_tx, max_other, max_combined, rx_count,
// tx_count, other_count, combined_count.
func (k *kernel) channels(name string, p *problems) *ethside.Channels {
	w, err := getWords(k.fd, name, unix.ETHTOOL_GCHANNELS, channelsWords)
	if err != nil {
		note(p, "SIOCETHTOOL ETHTOOL_GCHANNELS", name, err)
		return nil
	}
	return &ethside.Channels{Source: "SIOCETHTOOL ETHTOOL_GCHANNELS " + name,
		RXMax: int(w[1]), TXMax: int(w[2]), CombinedMax: int(w[4]),
		RX: int(w[5]), TX: int(w[6]), Combined: int(w[8])}
}

// ethtool_pauseparam: autoneg, rx_pause, tx_pause.
func (k *kernel) pause(name string, p *problems) *ethside.Pause {
	w, err := getWords(k.fd, name, unix.ETHTOOL_GPAUSEPARAM, pauseWords)
	if err != nil {
		note(p, "SIOCETHTOOL ETHTOOL_GPAUSEPARAM", name, err)
		return nil
	}
	an, rx, tx := w[1] != 0, w[2] != 0, w[3] != 0
	return &ethside.Pause{Source: "SIOCETHTOOL ETHTOOL_GPAUSEPARAM " + name,
		Autoneg: &an, RX: &rx, TX: &tx}
}
