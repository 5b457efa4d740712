# The two commands a newcomer needs: `make demo` and `make test`.
SHELL := /usr/bin/env bash
GO ?= go
GOTEST_FLAGS ?= -race -count=1 -timeout 30m
FUZZTIME ?= 30s
BENCHTIME ?= 1x

.PHONY: all build demo test sim test-unit test-eno testbin generate docs verify kustomize bench scale fuzz mutation clean image image-reproducible eno-reconciler-image release rules-test

all: verify test

## The version and revision `tombstone-recovery version` and eno_tombstone_recovery_build_info report
## (design §9). The image is built with -buildvcs=false, so the revision is read from git here.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILDINFO = github.com/Azure/eno-tombstone-recovery/internal/buildinfo
VERSION_LDFLAGS = -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).revision=$(REVISION)

build:
	$(GO) build -ldflags='$(VERSION_LDFLAGS)' -o bin/tombstone-recovery ./cmd/tombstone-recovery

## demo: the whole story on the in-memory adapters, no cluster needed.
demo:
	$(GO) run ./cmd/tombstone-recovery demo

## testbin: build etcd and kube-apiserver for the real-API-server tests (cached in bin/).
testbin:
	./hack/testbin.sh

## test: every test, including the real API server, with the race detector and goleak; the image
## test runs the binary of `make image`, test/install renders deploy/ with bin/kustomize, and
## `make rules-test` checks deploy/alerts.yaml.
test: testbin image kustomize rules-test
	@echo "test: go test $(GOTEST_FLAGS) ./... (real API server tests start etcd + kube-apiserver from bin/)"
	$(GO) test $(GOTEST_FLAGS) ./...

## test-eno: the acceptance test next to stock Eno built from ENO_SRC (design §10), e.g.
##   make test-eno ENO_SRC=path/to/eno-v0.2.17.tar.gz
##   or: git clone --branch v0.2.17 https://github.com/Azure/eno ../eno && make test-eno ENO_SRC=../eno
## ENO_SRC is Eno's source: a directory or a .tar.gz. ENO_TEST_FLAGS adds go test flags (-run=...);
## ENO_MEASURE=1 adds the latency measurement, ENO_SHOW_LOGS=1 prints every process's log tail.
ENO_SRC ?=
ENO_TEST_FLAGS ?=
test-eno:
	@if [[ -z "$(ENO_SRC)" ]]; then \
		echo "test-eno: ENO_SRC is not set. It is Eno's source (github.com/Azure/eno v0.2.17), a directory or a .tar.gz:" >&2; \
		echo "  make test-eno ENO_SRC=path/to/eno-v0.2.17.tar.gz" >&2; \
		echo "  or: git clone --branch v0.2.17 https://github.com/Azure/eno ../eno && make test-eno ENO_SRC=../eno" >&2; \
		exit 1; \
	fi
	$(MAKE) testbin
	$(MAKE) build
	@eno_dir="$$(./hack/eno-build.sh "$(ENO_SRC)")" && \
	echo "test-eno: go test -race -count=1 -tags eno -timeout 40m ./test/eno/... (Eno from $$eno_dir)" && \
	ENO_DIR="$$eno_dir" TOMBSTONE_RECOVERY_BIN="$(CURDIR)/bin/tombstone-recovery" \
		$(GO) test -race -count=1 -tags eno -timeout 40m -v $(ENO_TEST_FLAGS) ./test/eno/...

## sim: the simulation of recovery next to a model of Eno (test/sim) over SIM_SCHEDULES random
## schedules; SIM_SEED=n replays one schedule with its trace. `make test` runs a short one.
SIM_SCHEDULES ?= 2000
SIM_SEED ?=
sim:
	SIM_SCHEDULES=$(SIM_SCHEDULES) SIM_SEED=$(SIM_SEED) $(GO) test -count=1 -timeout 60m -v -run 'TestExplore|TestNamedCases|TestQuietRecovery' ./test/sim/

## test-unit: the tests that need no API server.
test-unit:
	$(GO) test $(GOTEST_FLAGS) ./domain/... ./ports/... ./app/... ./adapters/memory/... ./adapters/contract/... ./internal/archtest/...

## generate: counterfeiter fakes (counterfeiter runs from tools/go.mod, outside the main module).
generate:
	$(GO) generate ./ports/...

## docs: rewrite README.md's flag table from `tombstone-recovery run -h`.
docs:
	$(GO) run ./hack/flagtable -update

## verify: fakes up to date, gofmt, vet, import direction, the eno-reconciler embedding constraints,
## Markdown links and design references, document budgets and README.md's flag table.
verify:
	./hack/verify.sh

## bench: benchmarks with their same-run baselines, then the scale run; see BENCHMARKS.md.
bench: testbin
	$(GO) test -run='^$$' -bench=. -benchmem -count=1 ./...
	$(MAKE) scale

## scale: the real binary records Compositions from scratch at --kube-api-qps=50: 1,000, the same
## 1,000 with inventories 4x larger (14 more labels per resource), then 3,000 (about 15 minutes).
## Reports go to bin/scale-*.md (relative to this folder; the test creates bin/). Every `go test`
## of test/perf, and so `make test`, runs a trial of 24 Compositions through the same steps.
## Then the mass recovery of issue 35 at ENO_MASS_SIZES Compositions (bin/scale-mass-recovery.md);
## ENO_MASS_BASE_BIN=path alternates a baseline binary with it, at sizes up to ENO_MASS_BASE_MAX
## (31b0bd5, before the fleet index, reads the fleet per plan: 4 minutes at 300). Trial: 8 Compositions.
ENO_MASS_BASE_MAX ?= 300
ENO_MASS_SIZES ?= 100,300,1000
scale: testbin
	ENO_SCALE=1 ENO_SCALE_REPORT=bin/scale-1000.md $(GO) test -count=1 -timeout=60m -run='^TestScale$$' -v ./test/perf/
	ENO_SCALE=1 ENO_SCALE_EXTRA_LABELS=14 ENO_SCALE_REPORT=bin/scale-1000-inventories-4x.md $(GO) test -count=1 -timeout=60m -run='^TestScale$$' -v ./test/perf/
	ENO_SCALE=1 ENO_SCALE_COMPOSITIONS=3000 ENO_SCALE_REPORT=bin/scale-3000.md $(GO) test -count=1 -timeout=60m -run='^TestScale$$' -v ./test/perf/
	ENO_MASS=1 ENO_MASS_SIZES=$(ENO_MASS_SIZES) ENO_MASS_BASE_BIN=$(ENO_MASS_BASE_BIN) ENO_MASS_BASE_MAX=$(ENO_MASS_BASE_MAX) ENO_MASS_REPORT=bin/scale-mass-recovery.md $(GO) test -count=1 -timeout=120m -run='^TestMassRecovery$$' -v ./test/perf/

## fuzz: run every fuzz target for FUZZTIME each.
fuzz:
	./hack/fuzz.sh $(FUZZTIME)

## mutation: remove each safety rule of hack/mutations.txt in a private copy; every mutant must be killed.
mutation: testbin kustomize
	$(GO) run ./hack/mutate

## image: the OCI image of tombstone-recovery as bin/tombstone-recovery-image.tar, built by
## hack/image (its own module) without a container daemon or a registry. The same commit gives the
## same digest: a static, trimmed binary without build id, every time the commit's.
IMAGE_SOURCE ?= https://github.com/Azure/eno-tombstone-recovery
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
IMAGE ?= eno-tombstone-recovery:$(VERSION)
ENO_IMAGE ?= eno-reconciler-wired:$(VERSION)
STATIC_BUILD = CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -buildvcs=false \
	-ldflags='-s -w -buildid= $(VERSION_LDFLAGS)'
IMAGE_TOOL = $(GO) -C hack/image run . -source=$(IMAGE_SOURCE) -revision=$(REVISION) -version=$(VERSION) \
	-created=$(SOURCE_DATE_EPOCH) -arch=$(IMAGE_ARCH)
image:
	$(STATIC_BUILD) -o bin/image/tombstone-recovery ./cmd/tombstone-recovery
	$(IMAGE_TOOL) -binary=$(CURDIR)/bin/image/tombstone-recovery -entrypoint=/tombstone-recovery \
		-ref=$(IMAGE) -output=$(CURDIR)/bin/tombstone-recovery-image.tar

## image-reproducible: build the image twice from scratch outputs; the digests must be equal.
image-reproducible:
	@rm -rf bin/image bin/tombstone-recovery-image.tar
	@first="$$($(MAKE) --no-print-directory image | tail -1)" && echo "$$first" && \
	rm -rf bin/image bin/tombstone-recovery-image.tar && \
	second="$$($(MAKE) --no-print-directory image | tail -1)" && echo "$$second" && \
	if [[ "$${first##* sha256:}" != "$${second##* sha256:}" ]]; then \
		echo "image-reproducible: two builds of one commit gave different digests" >&2; exit 1; \
	fi && echo "image-reproducible: ok"

## eno-reconciler-image: the same for eno-reconciler with the controller wired in (design §8.2),
## built from ENO_SRC by hack/eno-build.sh, as bin/eno-reconciler-image.tar.
eno-reconciler-image:
	@if [[ -z "$(ENO_SRC)" ]]; then \
		echo "eno-reconciler-image: ENO_SRC is not set. It is Eno's source (v0.2.17), a directory or a .tar.gz:" >&2; \
		echo "  make eno-reconciler-image ENO_SRC=path/to/eno-v0.2.17.tar.gz" >&2; \
		exit 1; \
	fi
	@eno_dir="$$(CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) GOFLAGS='-trimpath -buildvcs=false -ldflags=-buildid=' \
		./hack/eno-build.sh "$(ENO_SRC)")" && \
	mkdir -p bin/image && cp "$$eno_dir/bin/eno-reconciler-wired" bin/image/eno-reconciler && \
	$(IMAGE_TOOL) -binary=$(CURDIR)/bin/image/eno-reconciler -entrypoint=/eno-reconciler \
		-ref=$(ENO_IMAGE) -output=$(CURDIR)/bin/eno-reconciler-image.tar

## kustomize: the kustomize CLI in bin/ (a tool, outside the module graph), for OVERLAY and
## test/install; reinstalled when bin/kustomize is another version. v5.8.2 is the newest whose go
## directive (1.26.0) Go 1.26 accepts.
KUSTOMIZE_VERSION ?= v5.8.2
kustomize:
	@[[ "$$($(CURDIR)/bin/kustomize version 2>/dev/null)" == "$(KUSTOMIZE_VERSION)" ]] || \
		GOBIN=$(CURDIR)/bin $(GO) install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)

## release: bin/release.yaml, deploy/control-plane/release.yaml with its image set to IMAGE; with
## OVERLAY=deploy/overlays/<name>, that overlay rendered by kustomize instead.
OVERLAY ?=
release: $(if $(OVERLAY),kustomize)
	@mkdir -p bin
	set -o pipefail; $(if $(OVERLAY),$(CURDIR)/bin/kustomize build $(OVERLAY),cat deploy/control-plane/release.yaml) | \
		sed 's|image: eno-tombstone-recovery:dev$$|image: $(IMAGE)|' > bin/release.yaml
	@grep -q 'image: $(IMAGE)$$' bin/release.yaml || { echo "release: no image line replaced" >&2; exit 1; }
	@echo "release: bin/release.yaml (image $(IMAGE)); apply it on the control plane$(if $(OVERLAY),, and deploy/downstream/release-downstream.yaml downstream)"

## rules-test: promtool checks and unit-tests deploy/alerts.yaml. Without promtool on PATH it takes
## the one from Debian's prometheus package, unpacked into bin/ (apt-get download, no service).
PROMTOOL ?= $(shell command -v promtool || echo $(CURDIR)/bin/promtool)
rules-test: $(PROMTOOL)
	$(PROMTOOL) check rules deploy/alerts.yaml
	$(PROMTOOL) test rules deploy/alerts_test.yaml

$(CURDIR)/bin/promtool:
	@echo "rules-test: promtool from Debian's prometheus package (apt-get download, unpacked into bin/)"
	@set -euo pipefail; tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	cd "$$tmp"; apt-get download prometheus >/dev/null 2>&1 || { apt-get update -qq && apt-get download prometheus; }; \
	dpkg-deb -x prometheus_*.deb root; mkdir -p $(CURDIR)/bin; install -m 0755 root/usr/bin/promtool $(CURDIR)/bin/promtool
	$(CURDIR)/bin/promtool --version | head -1

clean:
	rm -rf bin/tombstone-recovery bin/image bin/*-image.tar bin/release.yaml bin/promtool bin/kustomize
