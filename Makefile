# writ — make targets. `make run` and `make test` do their own set-up.
GO        ?= go
FUZZTIME  ?= 60s
BIN       := bin/writ
GOBIN     := $(shell $(GO) env GOPATH)/bin
# The stock OPA CLI, to prove the shipped Rego passes `opa fmt`, `opa check
# --strict` and `opa test` outside writ too.
OPA_VERSION := v1.22.3
OPA       := $(GOBIN)/opa

.PHONY: build test test-deps run bench bench-check bench-envoy lint fmt capture fuzz deps opa policy-lint

build:
	$(GO) build -o $(BIN) ./cmd/writ

deps:
	$(GO) mod download

# Node.js and Chromium for the SDK-peer and report tests (Debian packages).
test-deps:
	bash .ci/deps

# The whole suite: formatting and vet first, then every test with the race detector.
test: deps test-deps lint
	$(GO) test -race -count=1 ./...

# The main job on an embedded default: writ in front of the seed's agents, driven
# through the whole delegation scenario with a real A2A client.
run: deps
	$(GO) run ./cmd/writ demo

# The benchmark report: in-process benchmarks and ext_authz under load (writ
# pinned to CPU 0, bench/load to CPU 1), written to bench/REPORT.md. DURATION
# (8s) per load run, PASSES, ROUNDS, BENCHTIME, RATES, SKIP: see bench/report.
# About 10 minutes on a 2-core host (plus ~2 minutes minting tokens the first time).
bench: deps
	$(GO) run ./bench/report -out bench/REPORT.md

# A fresh report compared with the committed one: fails when a headline ratio
# regressed by more than 25%.
bench-check: deps
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  $(GO) run ./bench/report -out "$$tmp/REPORT.md" && \
	  $(GO) run ./bench/report -compare bench/REPORT.md "$$tmp/REPORT.md"

# ext_authz under load: writ pinned to CPU 0, ghz to CPU 1, against an
# always-allow baseline in the same run (installs ghz on first use).
bench-envoy: deps
	bash bench/extauthz.sh

lint: policy-lint
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Install the OPA CLI once (it is built from source by the Go toolchain).
opa:
	@if ! "$(OPA)" version 2>/dev/null | grep -q "$(OPA_VERSION:v%=%)"; then \
	  echo "installing opa $(OPA_VERSION) (one-time build, a few minutes)"; \
	  (cd /tmp && GOFLAGS=-mod=mod $(GO) install github.com/open-policy-agent/opa@$(OPA_VERSION)); fi

policy-lint: opa
	@out=$$("$(OPA)" fmt -l policies); if [ -n "$$out" ]; then echo "opa fmt would change:"; echo "$$out"; exit 1; fi
	"$(OPA)" check --strict policies
	"$(OPA)" test policies

fmt:
	gofmt -w $$(git ls-files '*.go')

# Regenerate testdata/a2a/ from the real SDKs (needs Node and npm).
capture:
	bash testdata/capture/run.sh

# Run every fuzz target for FUZZTIME each (make fuzz FUZZTIME=60s).
fuzz:
	$(GO) test ./adapters/a2a -run='^$$' -fuzz='^FuzzParseJSONRPC$$' -fuzztime=$(FUZZTIME)
	$(GO) test ./adapters/a2a -run='^$$' -fuzz='^FuzzParseREST$$' -fuzztime=$(FUZZTIME)
	$(GO) test ./adapters/acp -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZTIME)
	$(GO) test ./adapters/wire -run='^$$' -fuzz='^FuzzSSEReader$$' -fuzztime=$(FUZZTIME)
	$(GO) test ./adapters/wire -run='^$$' -fuzz='^FuzzDuplicateKeys$$' -fuzztime=$(FUZZTIME)
