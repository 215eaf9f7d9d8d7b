# talchaos — see README.md.
# bash: make test's steps time themselves with its time keyword (STEP).
SHELL := /bin/bash
GO       ?= go
BIN      ?= bin/talchaos
SCENARIO ?= too-many-learners
SEED     ?= 1
REPORT   ?= talchaos-report

.PHONY: all build run test test-lane-scenarios test-lane-cmd test-lane-sim test-lane-containers test-step-norace test-step-race-build test-packages test-scenarios fuzz test-long lint bench bench-go clean kube

all: build

# -buildvcs=auto stamps the commit into the binary (talchaos version, every
# report), whatever GOFLAGS says.
build:
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -o $(BIN) ./cmd/talchaos

# The main job: a built-in scenario on the embedded sim target. Prints the
# verdict and the path of report.json.
run: build
	$(BIN) run $(SCENARIO) --seed $(SEED) --report-dir $(REPORT)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Every test under the race detector; the scenario suite drives the engine, the
# sim and the fakes through real runs. Then the decoders of the files users
# write are fuzzed for a bounded number of inputs on top of their seed corpora.
# A count, not a duration: Go 1.26's fuzz coordinator can fail a target with a
# bare "context deadline exceeded" when -fuzztime's deadline races a worker
# starved by the race-enabled tests (golang/go#75804, fixed in Go 1.27); a
# count has no deadline to race, a slow machine only fuzzes for longer.
# 5000 inputs each, one worker: at 30000 on two workers the four took about
# 3.5 minutes of both cores, a fifth of make test's CPU, and starved the
# runs in the other lanes.
# 2500 since stop 51, to give make test back time on slower machines: the
# seed corpora run in full every time, and every make test fuzzes afresh.
FUZZTIME ?= 2500x
FUZZPAR  ?= 1
# Each input that finds new coverage is minimised first, for up to a minute
# by default: with a report of 60 kB read, judged and rendered per try, a few
# such inputs held the fuzzing for minutes. A count bounds it.
FUZZMIN  ?= 20x

test: lint kube
	@echo "[lanes start $$(date +%T)]"
	$(MAKE) --no-print-directory -j4 test-lane-scenarios test-lane-sim test-lane-containers test-lane-cmd

# make test runs in four lanes side by side, balanced by measurement
# (docs/measurements.md, "Stop 34", "Stop 39", "Stop 43", "Stop 44", "Stop 52"
# and "Stop 55"): the scenario suite (three processes), then the example
# bootstrap's certification and the quick packages; the race build, then the
# sim's tests; and, once both the race build and cmd/talchaos's two tests
# without the race detector are done, the containers' tests then the
# fuzzers, and the rest of cmd/talchaos's then its real-target and replay
# tests.
#
# Only one step compiles the race detector's build of the dependencies (the
# race build: the three packages of minutes' test binaries, compiled and
# linked once, which the lanes then run): go test processes do not share a build in
# progress, and at stop 52 the containers' step started beside the sim's
# compiled it a second time, both slower by minutes. The fuzzers count
# inputs, no window of theirs is timed, so they build (about 1.5 minutes on
# a fresh machine, "Stop 41"; their instrumented build is another build of
# every package) and run at a lower priority than the runs beside them,
# whose Talos minutes are seconds. In a lane of their own, beside the race
# build or after it, they took what the timed runs needed and make test was
# slower ("Stop 55").
#
# The steps mostly wait on their runs' timers, but a cold make test is bound
# by CPU: at stop 55, on a fresh machine, its lanes used 1.7 of the 2 cores
# (each step's CPU is in make test's output), so a step moved from one lane
# to another saves only the wait it leaves. Three packages at once beside the
# suite's two processes ran the machine at load 16 and lost Kubernetes
# built-ins, sim and cmd to their deadlines at stop 34, before Step 14 cut
# the CPU a verdict costs; at stop 52 that many, once the no-race step was
# done, ran green.
CMD_LAST := ^(TestRealTarget|TestReplay)
# Two of cmd/talchaos's tests run without the race detector: each runs
# whole scenarios again and again (the real target against the sim, three
# built-ins twice; a night's catalogue sharded and merged, twice), their
# code paths under the detector in the tests that run one scenario each
# (the real target's, replay's, hunt's, nightly's, the sharded hunt's and
# certify's). Under it they took 111 s of CPU, without it 32 s
# (docs/measurements.md "Stop 44"): a tenth of what make test's lanes shared then.
CMD_NORACE := ^(TestRealTargetMatchesSim|TestShardedNightlyMergesAsTheWorkflowDoes)$$
# The rest of cmd/talchaos: all but the two steps above.
CMD_APART := $(CMD_LAST)|$(CMD_NORACE)
QUICK_PACKAGES = $$($(GO) list ./... | grep -v -e '/scenarios$$' -e '/sim/container$$' -e '/talchaos/sim$$' -e '/cmd/talchaos$$' -e '/examples/bootstrap$$')
RACE_PACKAGES := ./sim ./sim/container ./cmd/talchaos

# Each lane's steps say when they start and end (LANE_MARK), and what each
# took in wall time and in CPU (STEP: bash's time, whose user and sys count
# the step's processes and their children, the Kubernetes binaries a run
# starts among them, but not the processes of the containers Docker runs),
# so that the lanes can be balanced from any make test's output.
LANE_MARK = @echo "[lane $@ $$(date +%T)]"
STEP = TIMEFORMAT='[step $@ $(1): %0R s wall, %0U s user, %0S s sys]'; time

test-lane-scenarios:
	$(LANE_MARK) suite
	$(call STEP,suite) $(MAKE) --no-print-directory test-scenarios
	$(LANE_MARK) packages
	$(call STEP,packages) $(GO) test -count=1 -race -timeout 8m -p 1 ./examples/bootstrap $(QUICK_PACKAGES)
	$(LANE_MARK) done

test-lane-sim: test-step-race-build
	$(LANE_MARK) sim
	$(call STEP,sim) hack/testbin sim $(TESTBIN)/sim.test -test.timeout 12m
	$(LANE_MARK) done

test-lane-containers: test-step-norace test-step-race-build
	$(LANE_MARK) containers
	$(call STEP,containers) hack/testbin sim/container $(TESTBIN)/container.test -test.timeout 12m
	$(LANE_MARK) fuzz
	$(call STEP,fuzz) nice -n 10 $(MAKE) --no-print-directory fuzz
	$(LANE_MARK) done

test-lane-cmd: test-step-norace test-step-race-build
	$(LANE_MARK) cmd
	$(call STEP,cmd) hack/testbin cmd/talchaos $(TESTBIN)/talchaos.test -test.timeout 12m -test.skip '$(CMD_APART)'
	$(LANE_MARK) cmd real-target and replay
	$(call STEP,cmd real-target and replay) hack/testbin cmd/talchaos $(TESTBIN)/talchaos.test -test.timeout 12m -test.run '$(CMD_LAST)' -test.skip '$(CMD_NORACE)'
	$(LANE_MARK) done

test-step-norace:
	$(LANE_MARK) cmd without the race detector
	$(call STEP,cmd without the race detector) $(GO) test -count=1 -timeout 10m -run '$(CMD_NORACE)' ./cmd/talchaos

# The race build: compiles and links the test binaries of the packages
# whose tests take minutes into TESTBIN, where the lanes run them through
# hack/testbin, each in its package's directory and its output shown only
# when it fails, as go test would. go test caches no linked
# binary: running them through go test again linked each anew, 10 to 25 s
# of CPU apiece, four times (stop 57).
TESTBIN := $(CURDIR)/bin/test
test-step-race-build:
	$(LANE_MARK) race build
	@rm -rf $(TESTBIN) && mkdir -p $(TESTBIN)
	$(call STEP,race build) $(GO) test -race -c -o $(TESTBIN)/ $(RACE_PACKAGES)

# Every package's tests, as one go test (what the lanes run, in one).
test-packages:
	$(GO) test -count=1 -race -timeout 20m $$($(GO) list ./... | grep -v '/scenarios$$')

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMIN) -parallel $(FUZZPAR) ./harness/scenario
	$(GO) test -run '^$$' -fuzz '^FuzzLoadInventory$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMIN) -parallel $(FUZZPAR) ./harness/real
	$(GO) test -run '^$$' -fuzz '^FuzzReadReport$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMIN) -parallel $(FUZZPAR) ./reports
	$(GO) test -run '^$$' -fuzz '^FuzzReadLedger$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMIN) -parallel $(FUZZPAR) ./reports/stats

# The scenario suite runs in three processes beside the other packages'
# tests: its runs mostly wait on Talos's timers (its two processes used a
# third of a core at stop 55), and one after the other they took longer
# than everything else together. Ginkgo's processes and its CLI talk
# over loopback, so they share one network namespace (hack/innetns), where
# the built-ins with cluster.network take their addresses.
#
# The suite runs without the race detector, as users run talchaos: it checks
# each built-in's verdict, and under the detector its embedded etcd members
# and TLS handshakes cost several times the CPU, which on 2 cores starved
# the packages' tests beside it and the built-ins' own windows (3 Talos
# minutes are 3 s at 60x). The engine's concurrency stays under the
# detector in the packages' tests, which drive it through real runs
# (cmd/talchaos: run, hunt, nightly, certify, replay, the real target; sim;
# harness), and in make test-long, which runs every built-in at seeds 2 and 3
# under it.

# A goroutine a run left behind fails the suite after its specs, where
# Ginkgo's CLI shows no process output: the suite writes what it found into
# SUITE_LEAKS, printed here when the suite fails.
SUITE_LEAKS := $(CURDIR)/bin/suite-leaks

test-scenarios:
	$(GO) build -o bin/ginkgo github.com/onsi/ginkgo/v2/ginkgo
	rm -rf $(SUITE_LEAKS) && mkdir -p $(SUITE_LEAKS)
	TALCHAOS_SUITE_LEAKS=$(SUITE_LEAKS) $(GO) run ./hack/innetns -- bin/ginkgo --procs=3 --timeout=12m --no-color --succinct ./scenarios \
		|| { cat $(SUITE_LEAKS)/* 2>/dev/null; exit 1; }

# What make test leaves out to stay within 15 minutes on 2 cores: every
# built-in at seeds 2 and 3, judged again from its report.json (seed 1 is in
# make test), the five- and seven-member happy paths, a Failed etcd and a
# crash loop at five and seven control planes, and every built-in the
# container target can run (make test runs pki-mismatch) with a control plane
# powered off under Kubernetes on containers, the upgrade's refusals and drain
# and the Kubernetes endpoints through a reboot on the sim, the rolling upgrade
# with a member down and the Kubernetes too-many-learners pair, and the example
# bootstrap's rolling upgrade certified against upgrade-interrupted and
# upgrade-image-missing; about 30 minutes.
test-long:
	$(GO) test -count=1 -race -timeout 30m -run '^TestScenarios$$' ./scenarios -args '-ginkgo.label-filter=seeds || long'
	$(GO) test -count=1 -race -timeout 30m -run '^(TestBuiltinsAsOnSim|TestKubernetesFaults)$$' ./sim/container -args -all-builtins
	$(GO) test -count=1 -race -timeout 30m -run '^(TestUpgrade|TestKubernetesEndpoints)' ./sim -args -long
	$(GO) test -count=1 -race -timeout 10m ./examples/bootstrap -args '-ginkgo.label-filter=long'

# One table, measured on this machine with the built binary: every built-in's
# median time to the outcome (5 seeds, two at a time), the happy path's
# formation over bare embedded etcd forming the same way, a 7 + 50 cluster's
# peak RSS and formation, a 20-seed hunt at --parallel 1 and the default, and
# the catalogue x 20 seeds as 4 shards one after another (each shard's wall,
# the sum, the longest shard: a 4-runner matrix). Well over an hour on 2
# cores; BENCH_ARGS picks figures and sizes, e.g.
#   make bench BENCH_ARGS='-only shards -scenarios invalid-config,pki-mismatch -shard-seeds 1-4 -shards 2'
# It builds the Kubernetes binaries first (make kube): figure 1 runs the
# built-ins with Kubernetes too. bench-go runs the Go micro-benchmarks.
bench: build kube
	$(GO) run ./hack/bench -bin $(BIN) $(BENCH_ARGS)

bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin $(REPORT)

# The real Kubernetes control plane for Kubernetes-enabled scenarios
# (cluster.kubernetes) and the simulated kubelets, each built from its own
# module (kube/hyperkube: k8s.io/kubernetes needs replace lines that must stay
# out of the main module; kube/kwok: sigs.k8s.io/kwok at one release) into the
# cache talchaos looks in (sim/kubecp.Locate). Several minutes cold, nothing
# when they are there.
KUBE_VERSION := $(shell sed -n 's/^\tk8s.io\/kubernetes \(v[0-9.]*\)$$/\1/p' kube/hyperkube/go.mod)
KWOK_VERSION := $(shell sed -n 's/^\tsigs.k8s.io\/kwok \(v[0-9.]*\)$$/\1/p' kube/kwok/go.mod)
KUBE_MINOR   := $(word 2,$(subst ., ,$(KUBE_VERSION)))
KUBE_DIR     ?= $(or $(TALCHAOS_KUBE_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/talchaos/kube/$(KUBE_VERSION)-kwok-$(KWOK_VERSION))
KUBE_LDFLAGS := -s -w -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR)

kube: $(KUBE_DIR)/hyperkube $(KUBE_DIR)/kwok

# Only their absence triggers a build: the versions are in the path, and a
# fresh clone's new file times must not rebuild a cached binary.
$(KUBE_DIR)/hyperkube:
	@mkdir -p $(KUBE_DIR)
	cd kube/hyperkube && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o $@.tmp .
	mv $@.tmp $@

$(KUBE_DIR)/kwok:
	@mkdir -p $(KUBE_DIR)
	cd kube/kwok && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$(KWOK_VERSION:v%=%)" -o $@.tmp .
	mv $@.tmp $@

# Compatibility suite (separate module in compat/): the real talosctl and Talos's
# own pre-boot checks against `talchaos up`. Builds talosctl once into
# $XDG_CACHE_HOME/talchaos (or ~/.cache/talchaos); minutes cold, seconds warm.
.PHONY: compat
compat:
	cd compat && $(GO) test -count=1 -timeout 30m ./...
