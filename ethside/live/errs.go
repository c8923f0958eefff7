package live

import (
	"errors"
	"io/fs"

	"golang.org/x/sys/unix"
)

// unanswered tells an error that means "this device does not have it" —
// the driver lacks the operation, the device or file is absent — from a
// real failure. Unanswered parts stay nil (SKIP), never a problem.
func unanswered(err error) bool {
	for _, e := range []error{unix.EOPNOTSUPP, unix.ENOTSUP, unix.ENODEV,
		unix.ENOENT, unix.ENXIO, fs.ErrNotExist} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// note records err on p unless it is unanswered or nil.
func note(p *problems, call, iface string, err error) {
	if err == nil || unanswered(err) {
		return
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		p.add("%s %s: %s (%v)", call, iface, unix.ErrnoName(errno), err)
		return
	}
	p.add("%s %s: %v", call, iface, err)
}
