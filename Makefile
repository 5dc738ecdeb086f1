# rlm's build. `make demo` builds everything and runs the main job on an
# embedded example; `make test` runs every test (what CI runs).
GO      ?= go
BIN     ?= $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/rlmkit/rlm/internal/version.Version=$(VERSION)
# staticcheck is installed (pinned) by .ci/setup.
STATICCHECK ?= $(shell $(GO) env GOPATH)/bin/staticcheck
PLUGINS := $(wildcard plugins/*/cmd/rlm-plugin-*)

include plugins/pyodide/wasm/Makefile.inc

.PHONY: all build demo examples setup test test-short lint proto bench docs-screenshot clean e2e-k8s

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/rlm $(addprefix ./,$(PLUGINS))

demo: build examples
	@test -f plugins/pyodide/wasm/assets/python.wasm || echo "note: the WebAssembly backend (-b pyodide) is not built; 'make wasm' builds it (~10 minutes, cached after), 'make test' does too"
	$(BIN)/rlm exec -r python -c 'import sys; print("hello from", sys.version.split()[0])'
	$(BIN)/rlm run examples/needle/task.toml --provider replay
	@$(MAKE) --no-print-directory wasm-demo

# The examples' inputs are generated, not committed (3 MB of haystack).
examples: examples/needle/haystack.txt examples/aggregate/items.txt

examples/needle/haystack.txt examples/aggregate/items.txt: examples/gen/gen.go
	$(GO) run ./examples/gen/cmd/rlm-gen-examples examples

# What the tests need (runtimes, bubblewrap, staticcheck, CPython for WASI),
# installed when missing; silent when everything is there.
setup:
	@bash .ci/setup

# The whole suite: unit tests, plugin RPC tests and testscripts. It sets up
# first, so on a fresh Debian machine with only Go this is the one command.
test: setup
	$(MAKE) build lint
	$(GO) test -count=1 -timeout 30m ./...

test-short:
	$(GO) test -short ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	# The CLI, core and the daemon client build everywhere; the native
	# runtime plugins are Linux-only (prctl, openat2, pid namespaces).
	GOOS=windows $(GO) build ./cmd/rlm ./core/... ./internal/...
	GOOS=darwin $(GO) build ./cmd/rlm ./core/... ./internal/...

# Regenerate core/runtimepb with pinned generators (needs Debian's protoc).
proto:
	$(GO) generate ./core/runtimepb

bench: build
	$(GO) test -run '^$$' -bench . -benchtime 200x ./bench/...

# docs/trace-view.png: the needle run's page in headless Chromium, taken by
# the trace viewer's testscript (testscripts/testdata/trace/view.txtar).
docs-screenshot:
	RLM_UPDATE_DOCS=1 RLM_REQUIRE_BROWSER=1 $(GO) test -count=1 -run 'TestScripts/trace' ./testscripts

# The live Kubernetes checks of docs/kubernetes.md (root, Linux; not in CI):
# builds Kubernetes and agent-sandbox from the Go module proxy (cached) and
# the images from this checkout, brings up a two-node cluster, checks,
# tears it down. Figures land in $$RLM_E2E_DIR/results.txt.
e2e-k8s:
	deploy/e2e/build.sh
	deploy/e2e/image.sh
	deploy/e2e/cluster.sh up
	deploy/e2e/check.sh all; rc=$$?; deploy/e2e/cluster.sh down; exit $$rc

clean:
	rm -rf $(BIN)
