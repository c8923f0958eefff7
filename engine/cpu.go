package engine

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmabench/rdmabench/results"
)

// cpuClock samples this process's CPU time (all threads).
type cpuClock struct {
	user, sys time.Duration
	wall      time.Time
}

func readCPUClock() cpuClock {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return cpuClock{
		user: time.Duration(ru.Utime.Nano()),
		sys:  time.Duration(ru.Stime.Nano()),
		wall: time.Now(),
	}
}

// since is the CPU use between c and now.
func (c cpuClock) since() results.CPUFigure {
	now := readCPUClock()
	wall := now.wall.Sub(c.wall)
	if wall <= 0 {
		return results.CPUFigure{}
	}
	return results.CPUFigure{
		UserPct: 100 * float64(now.user-c.user) / float64(wall),
		SysPct:  100 * float64(now.sys-c.sys) / float64(wall),
	}
}
