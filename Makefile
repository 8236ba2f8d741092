# toolgate — build, run and test. Every target installs what it needs
# (pinned versions, sha256-checked) and caches native pieces outside the
# clone in ${TOOLGATE_CACHE:-~/.cache/toolgate}, so repeated runs are fast.

SHELL        := /bin/bash
.SHELLFLAGS  := -eu -o pipefail -c
GO           ?= go
BIN          := bin/toolgate
BENCH_BIN    := bin/toolgate-bench
CONFIG       ?= examples/toolgate.json
ADDR         ?= 127.0.0.1:8931
STATICCHECK  := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Debian's chromium, for the console's browser tests (a newer build is
# installed when a security update has replaced this one).
CHROMIUM_VERSION ?= 156.0.8078.114-1~deb12u1
# Every go command runs with the cgo flags for libtokenizers and the ONNX
# Runtime path (scripts/native-env.sh reads the cache).
NATIVE       := source scripts/native-env.sh >/dev/null &&
GOTEST_FLAGS ?=
# A bound for a hung test, per package. go test's default, 10m, is what
# cmd/toolgate's end-to-end tests take on a slow 2-core machine under load
# (435-588 s seen on an AMD EPYC of 2017): a hang guard, not a speed goal.
TEST_TIMEOUT ?= 30m

# The revision bin/toolgate is built from ("+dirty" with changes not
# committed): eval's "run" names it (commit), also when the build has no
# VCS stamp of Go's own (-buildvcs=false, as in GOFLAGS on some machines).
COMMIT       ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git status --porcelain 2>/dev/null | grep -q . && echo +dirty)
LDFLAGS      := -X main.commit=$(COMMIT)

.PHONY: all deps deps-run deps-native deps-model deps-servers deps-python deps-browser build build-bench run serve-stdio test smoke lint bench bench-report clean

all: build

## deps: install everything (native libraries, model, bundled npm servers, the Python MCP SDKs, the test browser)
deps: deps-run deps-python deps-browser

## deps-run: what the gateway on the bundled servers needs (make run, make serve-stdio)
deps-run: deps-native deps-model deps-servers

deps-native:
	@scripts/build-tokenizers.sh >&2
	@scripts/fetch-onnxruntime.sh >&2

deps-model:
	@scripts/fetch-model.sh --variant all >&2

deps-servers:
	@scripts/install-servers.sh >&2

# The official Python MCP SDK, 2.x and 1.x, for the interop tests (cmd/toolgate/python_test.go):
# a venv each in the cache, keyed by its scripts/python-requirements*.txt's sha256.
deps-python:
	@scripts/install-python.sh >&2

deps-browser:
	@CHROMIUM_VERSION='$(CHROMIUM_VERSION)' scripts/install-chromium.sh

## build: bin/toolgate
build: deps-native
	@$(NATIVE) $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/toolgate

## build-bench: bin/toolgate-bench, the performance harness (never part of bin/toolgate)
build-bench: deps-native
	@$(NATIVE) $(GO) build -o $(BENCH_BIN) ./cmd/toolgate-bench

## run: the gateway on the bundled example servers, streamable HTTP at http://$(ADDR)/mcp
run: deps-run build
	@$(NATIVE) exec ./$(BIN) serve --config $(CONFIG) --http $(ADDR)

## serve-stdio: the same gateway on stdio (what an MCP client launches)
serve-stdio: deps-run build
	@$(NATIVE) exec ./$(BIN) serve --config $(CONFIG)

## test: the whole suite, with the race detector on the packages that run goroutines, then the TypeScript-SDK smoke test
test: deps build
	@$(NATIVE) $(GO) vet ./...
	@$(NATIVE) $(GO) test $(GOTEST_FLAGS) -count=1 -timeout $(TEST_TIMEOUT) ./...
	@$(NATIVE) $(GO) test $(GOTEST_FLAGS) -count=1 -timeout $(TEST_TIMEOUT) -race ./gateway/... ./search/... ./index/... ./embed/...
	@$(MAKE) --no-print-directory smoke

## smoke: the official TypeScript MCP SDK drives bin/toolgate over stdio and HTTP
smoke: deps-servers build
	@node scripts/smoke.mjs --bin $(BIN) --config $(CONFIG)

## lint: gofmt, go vet, staticcheck
lint: deps-native
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt would change:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	@$(NATIVE) $(GO) vet ./...
	@$(NATIVE) $(GO) run $(STATICCHECK) ./...

## bench: Go benchmarks of the inner loops (what make run needs: no Python SDKs, no test browser)
bench: deps-run build
	@$(NATIVE) $(GO) test -run '^$$' -bench . -benchmem ./...

## bench-report: the whole-system figures in one table (README Performance); < 10 min on 2 cores
BENCH_FLAGS ?=
bench-report: deps-run build build-bench
	@$(NATIVE) ./$(BENCH_BIN) --toolgate $(BIN) --log-level warn $(BENCH_FLAGS)

clean:
	rm -rf bin
