package main

import (
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/rdmabench/rdmabench/cuda"
	"github.com/rdmabench/rdmabench/cuda/fakecuda"
	"github.com/rdmabench/rdmabench/results"
)

// The GPU tests run through rdmabench's CPU stand-in for CUDA
// (cuda/testdata/fakecuda): its device memory is host memory the CPU can no
// longer touch once registered (a touch kills the test binary), and its
// dma-buf is a memfd, which no RDMA driver imports, so every run exercises
// the fallback to peer memory and its message. The stand-in is loaded once
// per process, as the real libraries are.
var fakeCUDA struct {
	once sync.Once
	dir  string
	err  error
}

// removeFakeCUDA removes the stand-in's build folder once the tests end.
func removeFakeCUDA() {
	if fakeCUDA.dir != "" {
		os.RemoveAll(fakeCUDA.dir)
	}
}

func useFakeCUDA(t *testing.T) {
	t.Helper()
	fakeCUDA.once.Do(func() {
		dir, err := os.MkdirTemp("", "fakecuda")
		if err != nil {
			fakeCUDA.err = err
			return
		}
		fakeCUDA.dir = dir
		if _, fakeCUDA.err = fakecuda.Build(dir); fakeCUDA.err == nil {
			fakeCUDA.err = os.Setenv(cuda.EnvLibDir, dir)
		}
	})
	if fakeCUDA.err != nil {
		t.Fatal(fakeCUDA.err)
	}
}

// checkFakeGPU asserts a side's memory is the stand-in's GPU gpu, registered
// as peer memory after dma-buf failed for the reason an RDMA driver without
// dma-buf gives.
func checkFakeGPU(t *testing.T, m *results.Memory, gpu int) {
	t.Helper()
	if m == nil || m.Kind != results.GPUMemory || m.GPU == nil || *m.GPU != gpu || !m.FakeCUDA {
		t.Fatalf("memory %+v, want the stand-in's GPU %d", m, gpu)
	}
	if want := []string{"0000:10:00.0", "0000:11:00.0"}[gpu]; m.GPUPCI != want {
		t.Errorf("GPU PCI id %q, want %q", m.GPUPCI, want)
	}
	if m.Registration != results.RegPeerMemory || !strings.Contains(m.DmabufError, "ibv_reg_dmabuf_mr") ||
		!strings.Contains(m.DmabufError, "cannot import dma-buf") {
		t.Errorf("registration %q, dma-buf error %q: want peer memory after ibv_reg_dmabuf_mr failed", m.Registration, m.DmabufError)
	}
}

// TestE2EGPUMemoryAllTests runs every verbs test with --use-cuda 0 (and
// --verify where it applies).
func TestE2EGPUMemoryAllTests(t *testing.T) {
	needRDMA(t)
	useFakeCUDA(t)
	for _, test := range []string{"send-bw", "write-bw", "read-bw", "atomic-bw", "send-lat", "write-lat", "read-lat", "atomic-lat"} {
		t.Run(test, func(t *testing.T) {
			args := []string{test, "--loopback", "--use-cuda", "0", "-n", "200", "--json", "--timeout", "60s"}
			size := 8
			if !strings.HasPrefix(test, "atomic") {
				size = 4096
				args = append(args, "-s", "4K")
				if strings.HasSuffix(test, "-bw") {
					args = append(args, "--verify")
				}
			}
			code, out, errOut := run(args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			r := decodeRun(t, out)
			checkResults(t, r, []int{size}, strings.HasSuffix(test, "-lat"))
			checkFakeGPU(t, r.Memory, 0)
			if r.PeerMemory == nil || r.PeerMemory.Kind != results.HostMemory {
				t.Errorf("peer memory %+v, want host", r.PeerMemory)
			}
			if r.Inline != 0 {
				t.Errorf("inline %d on GPU memory", r.Inline)
			}
			if r.Verify && (r.Results[0].BadBytes == nil || *r.Results[0].BadBytes != 0) {
				t.Errorf("--verify: bad bytes %v", r.Results[0].BadBytes)
			}
			notes := strings.Join(r.Notes, "\n")
			if !strings.Contains(notes, "dma-buf registration failed, using peer memory") {
				t.Errorf("no fallback note: %q", notes)
			}
			if test == "write-lat" && !strings.Contains(r.Latency, "WRITE_WITH_IMM polled from the CQ") {
				t.Errorf("write-lat on GPU memory does not say how arrival is seen: %q", r.Latency)
			}
		})
	}
}

// TestE2EGPUMemoryBothSides: both sides on GPUs (two of the stand-in's),
// both directions, so that each side's GPU is sent from and received into;
// the text header names both.
func TestE2EGPUMemoryBothSides(t *testing.T) {
	needRDMA(t)
	useFakeCUDA(t)
	for _, test := range []string{"send-bw", "write-bw", "read-bw"} {
		code, out, errOut := run(test, "--loopback", "--use-cuda", "0", "--peer-use-cuda", "0000:11:00.0", "-b", "--verify",
			"-n", "200", "-s", "8K", "--share-cpus")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", test, code, errOut)
		}
		want := " Memory          : GPU 0 (0000:10:00.0), peer-memory registration [CPU stand-in for CUDA: not a GPU measurement]; peer GPU 1 (0000:11:00.0), peer-memory registration"
		if !strings.Contains(out, want) {
			t.Errorf("%s: header lacks %q:\n%s", test, want, out)
		}
	}
}

// TestE2EGPUVerifyCatchesCorruption: a damaged send slot on the GPU is
// found on the receiving side, whichever memory that is.
func TestE2EGPUVerifyCatchesCorruption(t *testing.T) {
	needRDMA(t)
	useFakeCUDA(t)
	for _, tc := range [][]string{
		{"write-bw", "--use-cuda", "0"},
		{"send-bw", "--use-cuda", "0"},
		{"send-bw", "--peer-use-cuda", "1", "-b", "--share-cpus"},
		{"send-bw", "--use-cuda", "0", "--peer-use-cuda", "1"},
	} {
		os.Setenv("RDMABENCH_VERIFY_CORRUPT", "1")
		code, out, errOut := run(append(tc, "--loopback", "--verify", "-n", "100", "--warmup", "0", "-s", "8K")...)
		os.Unsetenv("RDMABENCH_VERIFY_CORRUPT")
		if code == 0 || !strings.Contains(errOut, "data verification failed") || !strings.Contains(out, "BAD BYTES") {
			t.Errorf("%v: corruption not reported: exit %d, stderr %q\n%s", tc, code, errOut, out)
		}
	}
}

// TestE2EGPURegistrationFailures: each refused registration is one line
// that names the path, the reason and the remedy, and a non-zero exit.
func TestE2EGPURegistrationFailures(t *testing.T) {
	needRDMA(t)
	useFakeCUDA(t)
	for _, tc := range []struct {
		name string
		env  string
		args []string
		want []string
	}{
		{"dma-buf required", "", []string{"--use-cuda", "0", "--use-dmabuf"},
			[]string{"dma-buf registration failed (--use-dmabuf allows no other)", "ibv_reg_dmabuf_mr", "cannot import dma-buf"}},
		{"driver without export", "FAKECUDA_NO_DMABUF", []string{"--use-cuda", "0", "--use-dmabuf"},
			[]string{"cuMemGetHandleForAddressRange", "operation not supported", "cannot export dma-buf"}},
		{"no such GPU", "", []string{"--use-cuda", "7"}, []string{"GPU 7: this machine has 2 GPU(s)"}},
		{"no such bus id", "", []string{"--peer-use-cuda", "0000:3b:00.0"}, []string{"cudaDeviceGetByPCIBusId(0000:3b:00.0): invalid device ordinal"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(tc.env, "1")
			}
			code, _, errOut := run(append([]string{"write-bw", "--loopback", "-n", "10"}, tc.args...)...)
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			last := lines[len(lines)-1]
			if code == 0 {
				t.Fatalf("exit 0")
			}
			for _, w := range tc.want {
				if !strings.Contains(last, w) {
					t.Errorf("last line %q lacks %q (stderr %q)", last, w, errOut)
				}
			}
		})
	}
}

// TestE2EMemoryPlacement: host memory on the nodes asked for (a two-node
// guest: ci/rxe-run --numa 2), and in huge pages where a pool is reserved
// (--hugepages N); the JSON says where the pages are.
func TestE2EMemoryPlacement(t *testing.T) {
	needRDMA(t)
	cmdline, _ := os.ReadFile("/proc/cmdline")
	if _, err := os.Stat("/sys/devices/system/node/node1"); err != nil {
		if strings.Contains(string(cmdline), "rxe.numa=") {
			t.Fatal("guest booted with NUMA nodes, but node1 is missing")
		}
		t.Skip("one NUMA node (ci/rxe-run --numa 2 makes two)")
	}
	args := []string{"write-bw", "--loopback", "--mem-node", "1", "--peer-mem-node", "0", "-n", "50", "--json"}
	huge := strings.Contains(" "+string(cmdline), " hugepages=")
	if huge {
		args = append(args, "--hugepages")
	}
	code, out, errOut := run(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	r := decodeRun(t, out)
	for _, c := range []struct {
		m    *results.Memory
		node string
	}{{r.Memory, "1"}, {r.PeerMemory, "0"}} {
		if c.m == nil || c.m.Kind != results.HostMemory || c.m.Nodes != c.node || c.m.NodeAsked == nil || c.m.HugePages != huge {
			t.Errorf("memory %+v, want host memory on node %s (huge pages %v)", c.m, c.node, huge)
		}
	}
}
