# writ — make targets. `make run` and `make test` do their own set-up.
GO        ?= go
FUZZTIME  ?= 60s
BIN       := bin/writ
# Tools the targets build, pinned, in the project's own directory (never over a
# user's ~/go/bin): the stock OPA CLI, to prove the shipped Rego passes `opa
# fmt`, `opa check --strict` and `opa test` outside writ too, and golangci-lint.
TOOLS     := $(CURDIR)/.tools
OPA_VERSION := v1.22.3
OPA       := $(TOOLS)/opa
GOLANGCI_VERSION := v2.15.0
GOLANGCI  := $(TOOLS)/golangci-lint
# protoc-gen-go at go.mod's google.golang.org/protobuf: `make proto` generates
# A2A 1.0's wire types with it (internal/protogen), protoc from Debian's package.
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO := $(TOOLS)/protoc-gen-go

.PHONY: build install test test-deps gotestsum grpcurl run bench bench-check bench-envoy lint check security fmt capture fuzz deps opa golangci policy-lint interop soak proto protoc-gen-go

# `writ version` reads the module version and the commit from the build info;
# the build time is the one thing Go does not record, so these targets do.
BUILD_TIME := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS    := -X main.buildTime=$(BUILD_TIME)

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/writ

# writ into $(go env GOBIN), else $(go env GOPATH)/bin: on your PATH, usable
# from any directory (the shipped policies are embedded in the binary).
install:
	$(GO) install -ldflags "$(LDFLAGS)" ./cmd/writ
	@bin=$$($(GO) env GOBIN); [ -n "$$bin" ] || bin=$$($(GO) env GOPATH)/bin; \
	  echo "installed $$bin/writ"; "$$bin/writ" version

# The Helm chart's tests are a module of their own (deploy/helm/go.mod: the
# Helm library's graph must not change what writ links).
HELM_TESTS := deploy/helm

deps:
	$(GO) mod download
	cd $(HELM_TESTS) && $(GO) mod download

# Node.js, Chromium and redis-server for the SDK-peer, report and Redis store
# tests (Debian packages): only what is missing, without recommends, never
# upgrading an installed package, saying what it installs (.ci/deps).
test-deps:
	bash .ci/deps

# The whole suite: formatting and vet first, then every test with the race
# detector, every fuzz target (a count of executions each: .ci/fuzz) and a
# 60-second soak. The tests that run writ serve as a child (the interop
# matrix, the faults, the soak) share one build of it (WRIT_BIN). Each step is
# timed (.ci/step, into CI_OUT). The Helm chart's module runs without the
# race detector: its tests render templates in one goroutine, and without it
# they reuse what vet compiled of the Helm and Kubernetes libraries instead of
# compiling them a second time. The go test steps run under gotestsum, whose
# JSON the summary reads: a table of the steps, the slowest tests, and as the
# last line the test runner's own count of passed, skipped and failed tests.
CI_OUT    ?= $(CURDIR)/.ci-out
STEP      := CI_OUT=$(CI_OUT) bash .ci/step
GOTESTSUM_VERSION := v1.13.0
GOTESTSUM := $(TOOLS)/gotestsum
# grpcurl runs docs/envoy.md's CheckRequest as printed (internal/envoycheck).
GRPCURL_VERSION := v1.9.4
GRPCURL   := $(TOOLS)/grpcurl
GOTEST    := $(GOTESTSUM) --format standard-quiet --hide-summary=skipped
# The logic-test step runs without the race detector what has no concurrency
# for it to find and is ten times slower under it: the policies package (the
# shipped Rego tests, at every end of every limit, through writ and the stock
# OPA CLI) and authz's whole-policy equivalence tests, at their full size
# (they skip themselves in a -race build).
LOGIC_TESTS := ^(TestPartialMatchesFull|TestCachedDecisionsMatchWhole|TestResidualKeySoundness|TestResidualKeyCatchesAnOmission|TestPrunedInputDecidesAlike)$$
test:
	@rm -rf $(CI_OUT) && mkdir -p $(CI_OUT)
	@$(STEP) deps $(MAKE) --no-print-directory deps
	@$(STEP) test-deps bash .ci/deps
	@$(STEP) build $(MAKE) --no-print-directory build gotestsum grpcurl protoc-gen-go
	@$(STEP) check $(MAKE) --no-print-directory check
	@$(STEP) go-test env WRIT_BIN=$(CURDIR)/$(BIN) GRPCURL=$(GRPCURL) $(GOTEST) --jsonfile $(CI_OUT)/go-test.json -- -race -count=1 $$($(GO) list ./... | grep -v '/policies$$')
	@$(STEP) logic-test env WRIT_BIN=$(CURDIR)/$(BIN) sh -c '$(GOTEST) --jsonfile $(CI_OUT)/logic-policies.json -- -count=1 ./policies && \
	  $(GOTEST) --jsonfile $(CI_OUT)/logic-authz.json -- -count=1 -run "$(LOGIC_TESTS)" ./authz'
	@$(STEP) helm-test sh -c 'cd $(HELM_TESTS) && $(GOTEST) --jsonfile $(CI_OUT)/helm-test.json -- -count=1 ./...'
	@$(STEP) fuzz env FUZZTIME=$(FUZZTIME_CI) GO=$(GO) bash .ci/fuzz
	@$(STEP) soak env WRIT_BIN=$(CURDIR)/$(BIN) SOAK=60s SOAK_RATE=$(SOAK_RATE) SOAK_OUT= \
	  $(GOTESTSUM) --format standard-verbose --hide-summary=all --jsonfile $(CI_OUT)/soak.json -- -count=1 -run '^TestSoak$$' -timeout 3h ./internal/soak
	@CI_OUT=$(CI_OUT) GOTESTSUM=$(GOTESTSUM) bash .ci/summary

# The interop matrix (internal/interop): the SDK clients × the agents × writ's
# front doors, through the built writ serve; rewrites docs/interop.md's block
# with this run's table (make test runs the same matrix without rewriting).
interop: deps test-deps
	INTEROP_DOC=$(CURDIR)/docs/interop.md $(GO) test -count=1 -run 'TestInteropMatrix' ./internal/interop

# The soak (internal/soak): a fixed-rate mixed workload against the built writ
# serve for SOAK (default 30m; SOAK=60s for the short one), sampled every
# second to SOAK_OUT/soak.csv, soak.png and summary.md (default soak-out/).
SOAK      ?= 30m
SOAK_RATE ?= 50
SOAK_OUT  ?= $(CURDIR)/soak-out
soak: deps
	WRIT_BIN=$(WRIT_BIN) SOAK=$(SOAK) SOAK_RATE=$(SOAK_RATE) SOAK_OUT=$(SOAK_OUT) $(GO) test -count=1 -run '^TestSoak$$' -timeout 3h -v ./internal/soak

# The main job on an embedded default: writ in front of the seed's agents, driven
# through the whole delegation scenario with a real A2A client.
run: deps
	$(GO) run ./cmd/writ demo

# The benchmark report: in-process benchmarks, ext_authz and the sidecar under
# load (writ pinned to CPU 0, the load to CPU 1) beside a bare ext_authz server
# and a bare reverse proxy, issue 28's targets met or missed, written to
# bench/REPORT.md. DURATION (8s) per load run, PASSES, ROUNDS, BENCHTIME, RATES,
# SKIP: see bench/report. About 18 minutes on a 2-core host (plus ~7 minutes
# minting 200k tokens the first time). Nothing else should run on the host.
bench: deps
	$(GO) run ./bench/report -out bench/REPORT.md

# A fresh report compared with the committed one: fails when a headline ratio
# regressed by more than 25%.
bench-check: deps
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  $(GO) run ./bench/report -out "$$tmp/REPORT.md" && \
	  $(GO) run ./bench/report -compare bench/REPORT.md "$$tmp/REPORT.md"

# writ's Envoy doors under load, written to bench/ENVOY.md and printed: the
# ext_authz check and the ext_proc request (and response) phases, each with
# the shipped policy and an always-allow baseline in the same run (writ pinned
# to CPU 0, bench/load to CPU 1). DURATION (8s), PASSES, RATES: see
# bench/report (PASSES is 3 here). About 6 minutes on a 2-core host.
bench-envoy: deps
	$(GO) run ./bench/report -envoy -out bench/ENVOY.md

# The static checks: formatting, vet, the Rego checks and golangci-lint
# (.golangci.yml).
lint: check golangci
	"$(GOLANGCI)" run ./...

# The quick checks: formatting, vet, the Rego checks.
# The Rego checks come last: the OPA CLI they build shares most of its
# packages with writ, so after vet has compiled those it costs a third.
check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd $(HELM_TESTS) && $(GO) vet ./...
	@$(MAKE) --no-print-directory policy-lint

# Build a pinned tool into .tools/ once (from source, by the Go toolchain).
opa:
	@if ! "$(OPA)" version 2>/dev/null | grep -q "$(OPA_VERSION:v%=%)"; then \
	  echo "installing opa $(OPA_VERSION) into .tools/ (one-time build, a few minutes)"; \
	  (cd /tmp && GOFLAGS=-mod=mod GOBIN="$(TOOLS)" $(GO) install github.com/open-policy-agent/opa@$(OPA_VERSION)); fi

gotestsum:
	@if ! "$(GOTESTSUM)" --version 2>/dev/null | grep -q "$(GOTESTSUM_VERSION:v%=%)"; then \
	  echo "installing gotestsum $(GOTESTSUM_VERSION) into .tools/"; \
	  (cd /tmp && GOFLAGS=-mod=mod GOBIN="$(TOOLS)" $(GO) install gotest.tools/gotestsum@$(GOTESTSUM_VERSION)); fi

grpcurl:
	@# go install leaves grpcurl's -version unset: a stamp file names the version.
	@if [ ! -x "$(GRPCURL)" ] || [ ! -e "$(TOOLS)/.grpcurl-$(GRPCURL_VERSION)" ]; then \
	  echo "installing grpcurl $(GRPCURL_VERSION) into .tools/"; \
	  (cd /tmp && GOFLAGS=-mod=mod GOBIN="$(TOOLS)" $(GO) install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)) && \
	  touch "$(TOOLS)/.grpcurl-$(GRPCURL_VERSION)"; fi

protoc-gen-go:
	@if ! "$(PROTOC_GEN_GO)" --version 2>/dev/null | grep -q "$(PROTOC_GEN_GO_VERSION)"; then \
	  echo "installing protoc-gen-go $(PROTOC_GEN_GO_VERSION) into .tools/"; \
	  (cd /tmp && GOFLAGS=-mod=mod GOBIN="$(TOOLS)" $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)); fi

# Regenerate adapters/a2a/a2apb10 (A2A 1.0's messages) from the specification's
# proto committed beside it; internal/protogen's test checks the result is
# what is committed. protoc comes from Debian's protobuf-compiler (.ci/deps).
proto: protoc-gen-go
	@command -v protoc >/dev/null 2>&1 || WRIT_DEPS=protoc bash .ci/deps
	$(GO) run ./internal/protogen -protoc protoc -plugin "$(PROTOC_GEN_GO)" -out adapters/a2a/a2apb10

golangci:
	@if ! "$(GOLANGCI)" version 2>/dev/null | grep -q "$(GOLANGCI_VERSION:v%=%)"; then \
	  echo "installing golangci-lint $(GOLANGCI_VERSION) into .tools/ (one-time build, a few minutes)"; \
	  (cd /tmp && GOFLAGS=-mod=mod GOBIN="$(TOOLS)" $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)); fi

policy-lint: opa
	@out=$$("$(OPA)" fmt -l policies); if [ -n "$$out" ]; then echo "opa fmt would change:"; echo "$$out"; exit 1; fi
	"$(OPA)" check --strict policies
	"$(OPA)" test policies

fmt:
	gofmt -w $$(git ls-files '*.go')

# Regenerate testdata/a2a/ from the real SDKs (needs Node and npm).
capture:
	bash testdata/capture/run.sh

# SECURITY.md from the test run: the threat model and a matrix of every test
# that names a threat and its defence, with its result.
security: deps test-deps
	$(GO) run ./internal/securitydoc

# Run every fuzz target for FUZZTIME each (make fuzz FUZZTIME=60s); the
# targets are discovered. make test runs each for the count of executions
# .ci/fuzz-budget gives it (FUZZTIME_CI=budget): a count, not a duration,
# because a duration races Go 1.26's fuzzing coordinator (.ci/fuzz says why).
FUZZTIME_CI ?= budget
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) bash .ci/fuzz