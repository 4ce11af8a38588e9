# writ — make targets. `make run` and `make test` do their own set-up.
GO        ?= go
FUZZTIME  ?= 60s
BIN       := bin/writ

.PHONY: build test run bench lint fmt capture fuzz deps

build:
	$(GO) build -o $(BIN) ./cmd/writ

deps:
	$(GO) mod download

# The whole suite: formatting and vet first, then every test with the race detector.
test: deps lint
	$(GO) test -race -count=1 ./...

# The main job on an embedded default. Until the sidecar lands this is `writ
# inspect` on a bundled A2A 1.0 request: what a policy will see of it.
run: deps
	$(GO) run ./cmd/writ inspect -example a2a-1.0-send

bench: deps
	$(GO) test -run='^$$' -bench=. -benchmem ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

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
