package main

// What a mesh's processes cost, read from the processes themselves while
// they run: /proc/PID/status's VmHWM (peak RSS), /proc/PID/fd's entries,
// rank 0's CPU time (/proc/PID/stat), and when rank 0's stderr said the
// rendezvous was done and the rounds were.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rdmabench/rdmabench/internal/syncbuf"
)

// meshStats is one run's figures.
type meshStats struct {
	ranks             int           // processes seen
	maxHWMKiB, maxFDs int           // the largest of any rank
	sumHWMKiB         int           // of every rank's peak: the mean is sum / ranks
	rendezvous        time.Duration // start to rank 0's "rendezvous:" line
	rounds            time.Duration // that line to the last "rounds done"
	nRounds           int
	rank0CPU          time.Duration // rank 0's user + system time, at its last sample
	wall              time.Duration
}

func (s meshStats) String() string {
	mean := 0
	if s.ranks > 0 {
		mean = s.sumHWMKiB / s.ranks
	}
	perRound := time.Duration(0)
	if s.nRounds > 0 {
		perRound = s.rounds / time.Duration(s.nRounds)
	}
	return fmt.Sprintf("%d ranks seen; RSS peak mean %d MiB, max %d MiB; fds max %d; rendezvous %v; %d rounds in %v (%v a round); rank 0 CPU %v (%v a round); wall %v",
		s.ranks, mean>>10, s.maxHWMKiB>>10, s.maxFDs, s.rendezvous.Round(10*time.Millisecond), s.nRounds, s.rounds.Round(time.Second),
		perRound.Round(time.Millisecond), s.rank0CPU.Round(10*time.Millisecond), (s.rank0CPU / time.Duration(max(1, s.nRounds))).Round(time.Millisecond), s.wall.Round(time.Second))
}

// rankWatch samples the mesh's ranks until stop.
type rankWatch struct {
	done chan struct{}
	res  chan meshStats
}

// watchRanks samples every process running bin as "mesh --host" every
// 250 ms, and rank 0's stderr for its progress.
func watchRanks(bin string, stderr0 *syncbuf.Buffer) *rankWatch {
	w := &rankWatch{done: make(chan struct{}), res: make(chan meshStats, 1)}
	start := time.Now()
	go func() {
		var s meshStats
		hwm, fds := map[int]int{}, map[int]int{}
		var planned, lastRound time.Time
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, pid := range meshPids(bin) {
				if v := procHWM(pid); v > hwm[pid] {
					hwm[pid] = v
				}
				if v := procFDs(pid); v > fds[pid] {
					fds[pid] = v
				}
				if procRank(pid) == 0 {
					if cpu := procCPU(pid); cpu > s.rank0CPU {
						s.rank0CPU = cpu
					}
				}
			}
			e := stderr0.String()
			if planned.IsZero() && strings.Contains(e, "rdmabench mesh: rendezvous:") {
				planned = time.Now()
			}
			if n := strings.Count(e, " rounds done,"); n > s.nRounds {
				s.nRounds, lastRound = n, time.Now()
			}
			select {
			case <-w.done:
				s.ranks = len(hwm)
				for pid, v := range hwm {
					s.sumHWMKiB += v
					s.maxHWMKiB = max(s.maxHWMKiB, v)
					s.maxFDs = max(s.maxFDs, fds[pid])
				}
				if !planned.IsZero() {
					s.rendezvous = planned.Sub(start)
					if !lastRound.IsZero() {
						s.rounds = lastRound.Sub(planned)
					}
				}
				w.res <- s
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *rankWatch) stop(start time.Time) meshStats {
	close(w.done)
	s := <-w.res
	s.wall = time.Since(start)
	return s
}

// meshPids are the processes whose executable is bin and whose arguments
// are a mesh rank's (the wrapper's "mesh --host").
func meshPids(bin string) []int {
	return procPids(func(dir string) bool {
		exe, err := os.Readlink(filepath.Join(dir, "exe"))
		if err != nil || exe != bin {
			return false
		}
		cmd, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		return bytes.Contains(cmd, []byte("mesh\x00--host\x00"))
	})
}

// procPids are the processes whose /proc directory keep accepts.
func procPids(keep func(dir string) bool) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && keep(filepath.Join("/proc", e.Name())) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procHWM is /proc/PID/status's VmHWM in KiB (0: gone).
func procHWM(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			v, _ := strconv.Atoi(f[1])
			return v
		}
	}
	return 0
}

func procFDs(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents)
}

// procRank is the process's OMPI_COMM_WORLD_RANK or SLURM_PROCID (-1:
// neither).
func procRank(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	for _, kv := range bytes.Split(b, []byte{0}) {
		for _, name := range []string{"OMPI_COMM_WORLD_RANK=", "SLURM_PROCID="} {
			if v, ok := bytes.CutPrefix(kv, []byte(name)); ok {
				if r, err := strconv.Atoi(string(v)); err == nil {
					return r
				}
			}
		}
	}
	return -1
}

// procCPU is the process's user and system time (/proc/PID/stat's 14th
// and 15th fields, in clock ticks of 1/100 s).
func procCPU(pid int) time.Duration {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return time.Duration(u+s) * 10 * time.Millisecond
}
