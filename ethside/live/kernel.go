package live

import (
	"fmt"

	"github.com/mdlayher/ethtool"
	"golang.org/x/sys/unix"
)

// kernel holds the handles one Read uses: the ethtool netlink client, a
// socket for SIOCETHTOOL ioctls, and (dialled when first needed) an
// rtnetlink connection for DCB.
type kernel struct {
	eth    *ethtool.Client
	ethErr error // why eth is nil
	fd     int
	rtnl   *rtnlConn
}

func openKernel() (*kernel, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket(AF_INET, SOCK_DGRAM) for SIOCETHTOOL: %w", err)
	}
	k := &kernel{fd: fd}
	k.eth, k.ethErr = ethtool.New()
	return k, nil
}

func (k *kernel) close() {
	if k.eth != nil {
		_ = k.eth.Close()
	}
	if k.rtnl != nil {
		k.rtnl.close()
	}
	_ = unix.Close(k.fd)
}
