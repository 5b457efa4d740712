# The two commands a newcomer needs: `make demo` and `make test`.
SHELL := /usr/bin/env bash
GO ?= go
GOTEST_FLAGS ?= -race -count=1
FUZZTIME ?= 30s
BENCHTIME ?= 1x

.PHONY: all build demo test test-unit test-eno testbin generate verify bench scale fuzz mutation clean

all: verify test

build:
	$(GO) build -o bin/tombstone-recovery ./cmd/tombstone-recovery

## demo: the whole story on the in-memory adapters, no cluster needed.
demo:
	$(GO) run ./cmd/tombstone-recovery demo

## testbin: build etcd and kube-apiserver for the real-API-server tests (cached in bin/).
testbin:
	./hack/testbin.sh

## test: every test, including the real API server, with the race detector and goleak.
test: testbin
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

## test-unit: the tests that need no API server.
test-unit:
	$(GO) test $(GOTEST_FLAGS) ./domain/... ./ports/... ./app/... ./adapters/memory/... ./adapters/contract/... ./internal/archtest/...

## generate: counterfeiter fakes (counterfeiter runs from tools/go.mod, outside the main module).
generate:
	$(GO) generate ./ports/...

## verify: fakes up to date, gofmt, vet, import direction and the eno-reconciler embedding constraints.
verify:
	./hack/verify.sh

## bench: benchmarks with their same-run baselines, then the scale run; see BENCHMARKS.md.
bench: testbin
	$(GO) test -run='^$$' -bench=. -benchmem -count=1 ./...
	$(MAKE) scale

## scale: the real binary records 1,000 Compositions from scratch at --kube-api-qps=50 (3-4 minutes).
scale: testbin
	ENO_SCALE=1 $(GO) test -count=1 -timeout=60m -run='^TestScale$$' -v ./test/perf/

## fuzz: run every fuzz target for FUZZTIME each.
fuzz:
	./hack/fuzz.sh $(FUZZTIME)

## mutation: remove each safety rule of hack/mutations.txt in a private copy; every mutant must be killed.
mutation: testbin
	$(GO) run ./hack/mutate

clean:
	rm -rf bin/tombstone-recovery
