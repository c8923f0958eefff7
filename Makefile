# rdmabench — see README.md. Targets: build, test, demo, bench, vet, docs, dist, dist-check, container-check.
export PATH := /usr/local/go/bin:$(PATH)
GO      ?= go
BUILD   := build
BIN     := $(BUILD)/rdmabench
# Packages whose tests need an RDMA device; they run for real on the rxe target.
RXE_PKGS := ./verbs ./engine ./cmd/rdmabench ./doctor ./ethside/live
# The rxe target: ci/rxe-run runs a command where rxe0 exists (a qemu guest
# when the host kernel has no RDMA support).
RXE_RUN := ci/rxe-run --timeout 1500 --
# The one-node test guest has two NUMA nodes and a few reserved 2 MiB pages,
# so that host memory placement (--mem-node) and --hugepages are tested for
# real (checked against numa_maps).
RXE_TEST_RUN := ci/rxe-run --numa 2 --hugepages 16 --timeout 1500 --
# Tests between two hosts, the fault suite and the leak check: client on
# node 1, server on node 2 of the two-node target (ci/rxe-run --hosts 2).
TWO_NODE_TESTS := ^(TestTwoNode|TestFault)
# The agent's two-node test, in a session of its own (with Prometheus).
AGENT_TESTS := ^TestTwoNodeAgent$$
# Tests of the packages above that read no device (captured trees, the
# zero-cost NIC's fabric, the report in chromium, the docs): make unit runs
# them on the host, where they take 40 s; in the TCG guest they took 2.5
# minutes of the one-node suite, chromium's two near its 90 s limit.
HOST_ONLY_TESTS := ^(TestReportInChromium|TestReportLayoutInChromium|TestMeshFabricHealthy|TestMeshFabricQuick|TestMeshSrun|TestKubeIndexedJobMesh|TestKubeOnRealAPIServer|TestKubeletRunsHealthPod|TestCorpus|TestRealTreeClasses|TestDocsManPages|TestReference|TestPlotCommand)$$
# Fuzz targets, PACKAGE:FuzzName, run in turn for FUZZTIME each by make fuzz;
# make test runs each for FUZZ_SHORT. Their seeds (testdata/fuzz) run in unit.
# FUZZ_SHORT is a count, not a duration: Go 1.26's fuzz coordinator can fail
# a target with a bare "context deadline exceeded" when a duration ends on a
# loaded machine (golang/go#75804, fixed in 1.27); a count has no deadline.
# For make fuzz, such a failure without "Failing input written" is that bug.
FUZZ_TARGETS := ./proto:FuzzGreeting ./proto:FuzzControlStream ./engine:FuzzPlanResources \
	./plan:FuzzPlanValidate ./plan:FuzzParseSize ./plan:FuzzParseBytes ./plan:FuzzParseIntList \
	./rdmasys:FuzzParseCPUList ./agent/pinglist:FuzzParseTopology ./agent/pinglist:FuzzParsePeers \
	./agent/wire:FuzzUnmarshal ./agent/wire:FuzzReadAddress
FUZZTIME   ?= 10s
FUZZ_SHORT ?= 20000x

# A failing guest test leaves both guests' consoles, dmesg, rxe and link
# state and the host's link sockets here (ci/rxe-run, ci/guest/rxe-evidence).
export RXE_EVIDENCE_DIR ?= $(CURDIR)/$(BUILD)/evidence
RUNS ?= 5

# The version comes from the git tag or commit (build info; -buildvcs=auto
# overrides a GOFLAGS=-buildvcs=false in go env); VERSION=1.2.3 sets it for
# a package. The libibverbs headers carry no version: pkg-config's is
# recorded at link time.
VERSION ?=
VERSION_PKG := github.com/rdmabench/rdmabench/internal/version
GO_LDFLAGS := -X $(VERSION_PKG).verbsBuilt=$(shell pkg-config --modversion libibverbs 2>/dev/null)
ifneq ($(VERSION),)
GO_LDFLAGS += -X $(VERSION_PKG).version=$(VERSION)
endif
# The binaries are hardened as Debian builds its own (lintian's hardening
# checks): position-independent, relocations read-only and bound at start,
# the C parts with _FORTIFY_SOURCE.
GO_LDFLAGS += -extldflags=-Wl,-z,relro,-z,now
GOBUILDFLAGS := -buildvcs=auto -buildmode=pie -ldflags '$(GO_LDFLAGS)'
BUILD_CGO_CFLAGS ?= $(or $(CGO_CFLAGS),-O2 -g) -D_FORTIFY_SOURCE=2

.PHONY: all deps build docs dist dist-check rxe-user-check container-check vet unit fuzz fuzz-short rxe-test rxe-test-two-node rxe-test-agent test soak demo bench bench-overhead bench-agent bench-mesh clean

all: build

deps:
	@ci/deps.sh
	@$(GO) mod download

build: deps
	CGO_CFLAGS='$(BUILD_CGO_CFLAGS)' $(GO) build $(GOBUILDFLAGS) -o $(BUILD)/rdmabench ./cmd/rdmabench
	CGO_CFLAGS='$(BUILD_CGO_CFLAGS)' $(GO) build $(GOBUILDFLAGS) -o $(BUILD)/ncclbench ./cmd/ncclbench

# The tarball: both binaries, their man pages and bash and zsh completions
# (written by each binary from its own flag definitions), contrib/slurm's
# scripts (share/slurm; /usr/share/rdmabench/slurm in the packages), the rxe
# target (share/rxe: ci/rxe-run and its guest files; rdmabench-rxe-run in the
# packages), the README and docs/ beside it (its links to ../README.md hold;
# /usr/share/doc/rdmabench/docs in the packages);
# then from that tree a .deb and an .rpm (packaging/build.sh).
DIST_VERSION = $(shell $(BUILD)/rdmabench version --json | sed -n 's/^  "version": "\(.*\)",$$/\1/p')
DIST_NAME = rdmabench-$(DIST_VERSION)-linux-$(shell $(GO) env GOARCH)
# The .deb and the .rpm (packaging/): nfpm from the Go module proxy (go run
# caches the binary it builds), its version known good with Go 1.26.
NFPM ?= $(GO) run github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2
PKG_MAINTAINER ?= rdmabench maintainers <rdmabench@users.noreply.github.com>
dist: build
	@rm -rf $(BUILD)/dist/stage && mkdir -p $(BUILD)/dist/stage/bin $(BUILD)/dist/stage/share
	cp $(BUILD)/rdmabench $(BUILD)/ncclbench README.md $(BUILD)/dist/stage/
	cp -p -r docs $(BUILD)/dist/stage/docs
	cp -p -r contrib/slurm $(BUILD)/dist/stage/share/slurm
	mkdir -p $(BUILD)/dist/stage/share/rxe && cp -p -r ci/rxe-run ci/rxe-selftest ci/guest $(BUILD)/dist/stage/share/rxe/
	cp -p ci/README.md $(BUILD)/dist/stage/share/rxe/README.md
	$(BUILD)/rdmabench __docs $(BUILD)/dist/stage/share
	$(BUILD)/ncclbench __docs $(BUILD)/dist/stage/share
	mv $(BUILD)/dist/stage/rdmabench $(BUILD)/dist/stage/ncclbench $(BUILD)/dist/stage/bin/
	rm -rf $(BUILD)/dist/$(DIST_NAME) && mv $(BUILD)/dist/stage $(BUILD)/dist/$(DIST_NAME)
	tar -C $(BUILD)/dist -czf $(BUILD)/dist/$(DIST_NAME).tar.gz $(DIST_NAME)
	@echo "dist: $(BUILD)/dist/$(DIST_NAME).tar.gz"
	@rm -f $(BUILD)/dist/rdmabench_*.deb $(BUILD)/dist/rdmabench-*.rpm
	v=$$($(GO) run ./internal/version/pkgversion '$(DIST_VERSION)') && \
		GO=$(GO) PKG_MAINTAINER='$(PKG_MAINTAINER)' packaging/build.sh '$(NFPM)' $(BUILD)/dist/$(DIST_NAME) $(BUILD)/dist "$$v"

# docs/reference: a Markdown page per rdmabench command and one for
# ncclbench, written by the binaries from their flag sets, as the man pages
# are (internal/docgen). Committed; TestReference in cmd/rdmabench and
# cmd/ncclbench fails when they are stale. No deps: it needs only the Go
# toolchain and the libibverbs headers the build already has.
docs:
	$(GO) run ./cmd/rdmabench __docs --reference docs/reference
	$(GO) run ./cmd/ncclbench __docs --reference docs/reference

# The .deb installed into a clean Debian 12 root (debootstrap, cached under
# ~/.cache/rdmabench-dist) and run there; the .rpm's requires and files.
dist-check: dist
	ci/dist-check.sh $(BUILD)/dist

# The rxe target as other projects use it: the .deb's rdmabench-rxe-run
# (unpacked, not installed) runs contrib/rxe/pingpong-test.sh, rdma-core's
# ibv_rc_pingpong, from a directory outside the repository.
rxe-user-check: dist
	ci/user-rxe-check.sh $(BUILD)/dist

# The same, then packaging/Containerfile built with podman and run.
container-check: dist
	ci/dist-check.sh --container $(BUILD)/dist

vet: deps
	$(GO) vet ./...

# Host unit tests; hardware tests skip here and run in rxe-test. The
# Kubernetes tests start the real kube-apiserver, controller manager and
# scheduler ci/kube-tools.sh builds (cold: about 10 minutes; then cached),
# and the Indexed Job's pods they read back go to $(KUBE_PODS) for the
# two-node suite.
KUBE_PODS := $(BUILD)/kube-pods/pods.json
unit: deps
	tools=$$(ci/kube-tools.sh) && RDMABENCH_KUBE_TOOLS=$$tools RDMABENCH_KUBE_PODS=$(CURDIR)/$(KUBE_PODS) $(GO) test -count=1 ./...

$(KUBE_PODS):
	tools=$$(ci/kube-tools.sh) && RDMABENCH_KUBE_TOOLS=$$tools RDMABENCH_KUBE_PODS=$(CURDIR)/$@ \
		$(GO) test -count=1 -run '^TestKubeOnRealAPIServer$$' ./cmd/rdmabench

# A crash stops the loop; go test writes the input that caused it under the
# package's testdata/fuzz/FuzzName/, where it stays as a seed once fixed.
fuzz: deps
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t#*:}; \
		echo "fuzz $$pkg $$name for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZ_SHORT)

rxe-test: build
	@mkdir -p $(BUILD)/rxe-tests
	@for p in $(RXE_PKGS); do \
		n=$$(echo $${p#./} | tr / _); \
		$(GO) test -c -o $(BUILD)/rxe-tests/$$n.test $$p || exit 1; \
	done
	RDMABENCH_TESTS_SKIP='$(TWO_NODE_TESTS)|$(HOST_ONLY_TESTS)' $(RXE_TEST_RUN) ci/rxe-tests.sh $(BUILD)/rxe-tests $(RXE_PKGS)

# The stand-in NCCL (nccl/fakelib builds the same for host tests), beside
# the binaries: the two-node suite runs build/ncclbench with it under srun
# and mpirun.
FAKE_NCCL := $(BUILD)/fakenccl/libnccl.so.2
$(FAKE_NCCL): nccl/testdata/fakenccl/fakenccl.c
	@mkdir -p $(@D)
	$(CC) -shared -fPIC -O2 -Wall -o $@ $< -lpthread

# The zero-cost NIC (csrc/fakeverbs/fv.h): a libibverbs.so.1 stand-in
# that any verbs program loads unchanged (LD_LIBRARY_PATH=build/fakeverbs),
# perftest included, and the bare post/poll loop that bench-overhead holds
# both tools to.
FAKEVERBS_DIR := $(BUILD)/fakeverbs
FAKEVERBS := $(FAKEVERBS_DIR)/libibverbs.so.1
FAKEVERBS_SRC := $(wildcard csrc/fakeverbs/*.c)
FAKEVERBS_LIB_SRC := $(filter-out csrc/fakeverbs/bare.c csrc/fakeverbs/check.c,$(FAKEVERBS_SRC))
FAKEVERBS_CFLAGS := -O2 -g -Wall -Wextra -Wno-unused-parameter -D_FORTIFY_SOURCE=2
$(FAKEVERBS): $(FAKEVERBS_LIB_SRC) csrc/fakeverbs/fv.h csrc/fakeverbs/libibverbs.map
	@mkdir -p $(@D)
	$(CC) -shared -fPIC $(FAKEVERBS_CFLAGS) -fvisibility=hidden -Wl,--version-script=csrc/fakeverbs/libibverbs.map \
		-Wl,-soname,libibverbs.so.1 -Wl,-z,relro,-z,now -o $@ $(FAKEVERBS_LIB_SRC) -lpthread

# The bare loop and the stand-in's checks (fv-check; go test runs them in
# csrc/fakeverbs/fvtest) link the real libibverbs, as perftest does, and
# run on the stand-in by LD_LIBRARY_PATH like it.
$(FAKEVERBS_DIR)/fv-bare: csrc/fakeverbs/bare.c
	@mkdir -p $(@D)
	$(CC) $(FAKEVERBS_CFLAGS) -o $@ $< -libverbs -lpthread

$(FAKEVERBS_DIR)/fv-check: csrc/fakeverbs/check.c
	@mkdir -p $(@D)
	$(CC) $(FAKEVERBS_CFLAGS) -o $@ $< -libverbs

.PHONY: fakeverbs
fakeverbs: $(FAKEVERBS) $(FAKEVERBS_DIR)/fv-bare $(FAKEVERBS_DIR)/fv-check

# The two-node suite: client on node 1, server on node 2, and a real Slurm
# (munge, slurmctld, slurmd) and Open MPI across both (~9 min with boot);
# the Kubernetes Job's pods (from $(KUBE_PODS)) on the two hosts.
# It reuses the test binaries rxe-test built and build/'s binaries.
rxe-test-two-node: rxe-test $(FAKE_NCCL) $(KUBE_PODS)
	RDMABENCH_TESTS_RUN='$(TWO_NODE_TESTS)' RDMABENCH_TESTS_SKIP='$(AGENT_TESTS)' RDMABENCH_REQUIRE_TWO_NODES=1 \
		RDMABENCH_KUBE_PODS=$(CURDIR)/$(KUBE_PODS) \
		ci/rxe-run --hosts 2 --timeout 1500 -- ci/rxe-tests.sh $(BUILD)/rxe-tests ./cmd/rdmabench

# The agent on two nodes, scraped by Debian's prometheus: a healthy
# 4-minute run, then link down, rxe removed, an agent killed, 5% loss
# (~10 min with boot; make soak runs the healthy part for 10 minutes,
# RDMABENCH_AGENT_HEALTHY=10m here does the same). Two vCPUs a guest:
# node 1 runs Prometheus, three agents and the test, and with one vCPU
# its scrapes failed (92 in the healthy 4 minutes, one agent's for long
# enough to fire AgentDown) while the host's other core sat mostly idle.
rxe-test-agent: rxe-test
	RDMABENCH_TESTS_RUN='$(AGENT_TESTS)' RDMABENCH_REQUIRE_TWO_NODES=1 \
		ci/rxe-run --hosts 2 --smp 2 --timeout 1800 -- ci/rxe-tests.sh $(BUILD)/rxe-tests ./cmd/rdmabench

test: vet unit fuzz-short rxe-test rxe-test-two-node rxe-test-agent dist-check rxe-user-check

# The whole make test RUNS times, each from a fresh clone of HEAD under
# /tmp, and a table of every test that failed (build/soak/summary.txt).
soak: deps
	ci/soak.sh $(RUNS)

# The main job: real measurements, a health check of the device and a
# 4-rank mesh; results and plots land in build/demo (writable in the guest).
DEMO_DIR := $(BUILD)/demo
demo: build
	@mkdir -p $(DEMO_DIR)
	ci/rxe-run --timeout 1500 --rw $(DEMO_DIR) -- ci/demo.sh $(BIN) $(DEMO_DIR)

# The bench's knobs (README) reach the guest; the defaults (13 pairs, 21 for
# latency) take about 36 minutes; benchstat's verdicts end it, bench.json
# (every figure) lands in build/bench. The last part, bench-overhead, runs
# on this host. Every part runs even when one before it failed (its figures
# still count), and make bench fails at the end.
bench: build fakeverbs
	$(GO) build -o $(BUILD)/benchstat ./ci/benchstat
	@mkdir -p $(BUILD)/bench/twonode
	@rc=0; \
	RXE_PASS_ENV="PAIRS LAT_PAIRS BENCH_ONLY BENCH_AA $(RXE_PASS_ENV)" ci/rxe-run --timeout 3600 --rw $(BUILD)/bench -- \
		ci/bench.sh $(BIN) $(BUILD)/benchstat $(BUILD)/bench || { rc=1; echo "bench: the one-node part failed"; }; \
	echo "bench: node to node, on the two-node target (build/bench/twonode/bench.json)"; \
	BENCH_TWO_NODE=1 RXE_PASS_ENV="BENCH_TWO_NODE PAIRS LAT_PAIRS BENCH_ONLY BENCH_AA $(RXE_PASS_ENV)" ci/rxe-run --hosts 2 --timeout 1800 --rw $(BUILD)/bench -- \
		ci/bench.sh $(BIN) $(BUILD)/benchstat $(BUILD)/bench/twonode || { rc=1; echo "bench: the two-node part failed"; }; \
	echo "bench: the engine's own ceiling, on the fake device (csrc BenchmarkFakeRate: 2 B write-bw, 1 thread against --threads 2, alternated; medians of 15 each)"; \
	$(GO) test -run '^$$' -bench '^BenchmarkFakeRate$$' -benchtime 15x ./csrc > $(BUILD)/bench/fake-rate.out || { rc=1; echo "bench: the fake-device part failed"; }; \
	grep -E '^Benchmark' $(BUILD)/bench/fake-rate.out | tee $(BUILD)/bench/fake-rate.txt; \
	echo "bench: the tools' own cost per message, perftest's included, on the zero-cost NIC (make bench-overhead; build/bench/bench-overhead.json)"; \
	ci/bench-overhead.sh $(BIN) $(BUILD)/benchstat $(FAKEVERBS_DIR) $(BUILD)/bench || { rc=1; echo "bench: the overhead part failed"; }; \
	echo "bench: 256 real mesh ranks on the zero-cost NIC's fabric (make bench-mesh; build/bench/mesh/mesh-256.txt)"; \
	$(MAKE) --no-print-directory bench-mesh || { rc=1; echo "bench: the mesh part failed"; }; \
	echo "bench: the agent's CPU for 100 peers (make bench-agent; build/bench/agent/agent-cpu.txt)"; \
	$(MAKE) --no-print-directory bench-agent || { rc=1; echo "bench: the agent part failed"; }; \
	exit $$rc

# The agent's own CPU: a prober agent with AGENT_PEERS peers (100) at 10
# probes a second each, and the responder agents' (ci/agent-cpu.sh), over
# a minute in one rxe guest (about 4 minutes with
# the boot). TCG's figures are an upper bound, many times a real host's.
AGENT_PEERS ?= 100
bench-agent: build
	@mkdir -p $(BUILD)/bench/agent
	ci/rxe-run --mem 2048 --timeout 1200 --rw $(BUILD)/bench/agent -- ci/agent-cpu.sh $(BIN) $(BUILD)/bench/agent $(AGENT_PEERS) 60 10

# The mesh at scale: MESH_RANKS (256) real ranks under mpirun, 8 NICs a
# host, on the zero-cost NIC's fabric (cmd/rdmabench/meshfabric_test.go,
# docs/mesh.md#scale): healthy, nothing blamed, exit 0; the test's scale
# line (rendezvous, a round, rank 0's CPU, RSS, fds, wall) lands in
# build/bench/mesh. About 13 minutes on 2 CPUs; 9-10 GiB of memory.
MESH_RANKS ?= 256
bench-mesh:
	@mkdir -p $(BUILD)/bench/mesh
	RDMABENCH_MESH_FABRIC_RANKS=$(MESH_RANKS) RDMABENCH_MESH_FABRIC_KEEP=$(abspath $(BUILD))/bench/mesh $(GO) test -count=1 -run '^TestMeshFabricHealthy$$' -v -timeout 60m ./cmd/rdmabench \
		> $(BUILD)/bench/mesh/mesh-$(MESH_RANKS).out 2>&1; rc=$$?; \
	grep -E 'ranks: exit|^(--- |ok|FAIL)' $(BUILD)/bench/mesh/mesh-$(MESH_RANKS).out | tee $(BUILD)/bench/mesh/mesh-$(MESH_RANKS).txt; exit $$rc

# perftest, rdmabench and the bare loop on the zero-cost NIC, on this host
# (no guest: the stand-in is the device), in PAIRS interleaved pairs (13 by
# default: three to six minutes on two shared CPUs); benchstat's verdicts
# end it and build/bench/bench-overhead.json keeps every figure. It needs
# Debian's perftest (ci/deps.sh installs it).
bench-overhead: build fakeverbs
	$(GO) build -o $(BUILD)/benchstat ./ci/benchstat
	@mkdir -p $(BUILD)/bench
	ci/bench-overhead.sh $(BIN) $(BUILD)/benchstat $(FAKEVERBS_DIR) $(BUILD)/bench

clean:
	rm -rf $(BUILD)
