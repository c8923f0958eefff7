package live

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ifreqData is struct ifreq with ifr_data set: the interface name, then
// the union whose first word is the pointer SIOCETHTOOL reads
// (linux/if.h; the union is 24 bytes on 64-bit).
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// ethtoolIoctl runs one SIOCETHTOOL command on iface; buf begins with the
// command word and is sized by the caller for that command's struct, so
// the kernel never writes past it.
func ethtoolIoctl(fd int, iface string, buf unsafe.Pointer) error {
	var ifr ifreqData
	if len(iface) >= unix.IFNAMSIZ {
		return unix.ENAMETOOLONG
	}
	copy(ifr.name[:], iface)
	ifr.data = buf
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd),
		uintptr(unix.SIOCETHTOOL), uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(buf)
	if errno != 0 {
		return errno
	}
	return nil
}

// getWords runs a get command whose struct is n __u32 words beginning with
// the command (ethtool_ringparam, ethtool_coalesce, ethtool_channels,
// ethtool_pauseparam, ethtool_modinfo), and gives the words after it.
func getWords(fd int, iface string, cmd uint32, n int) ([]uint32, error) {
	w := make([]uint32, n)
	w[0] = cmd
	if err := ethtoolIoctl(fd, iface, unsafe.Pointer(&w[0])); err != nil {
		return nil, err
	}
	return w, nil
}

// setWords runs a set command with the same layout as its get.
func setWords(fd int, iface string, w []uint32) error {
	return ethtoolIoctl(fd, iface, unsafe.Pointer(&w[0]))
}
