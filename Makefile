# bottlefile: declarative sandboxes for AI coding agents.
SHELL := /bin/bash
GO ?= go
BIN := bin/bottlefile
PKGS := ./...
# staticcheck runs at this version, fetched through the module proxy; it
# does not enter go.mod.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/bottlefile and, beside it, the gateway alone (both static)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(dir $(BIN)) ./cmd/bottlefile ./cmd/bottlefile-gateway

.PHONY: deps
deps: ## Install what the tests need that Go does not bring (busybox-static)
	@scripts/ensure-busybox.sh

# -p 4: four test binaries at once, not GOMAXPROCS (2): cmd/bottlefile,
# drivers/swarm and drivers/docker each take minutes waiting on engines
# (cmd/bottlefile paces its own e2e tests, see its e2e_test.go).
.PHONY: test
test: deps ## Unit and integration tests (real Docker engine)
	$(GO) test -race -count=1 -p 4 -timeout 60m $(TESTFLAGS) $(PKGS)

.PHONY: check
check: ## gofmt, vet, staticcheck, go mod tidy drift, example formatting, import direction
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)
	@cp go.mod /tmp/bottlefile-go.mod.check && cp go.sum /tmp/bottlefile-go.sum.check && \
	  $(GO) mod tidy && \
	  if ! diff -q go.mod /tmp/bottlefile-go.mod.check >/dev/null || ! diff -q go.sum /tmp/bottlefile-go.sum.check >/dev/null; then \
	    echo "go mod tidy changed go.mod/go.sum: commit the result"; exit 1; fi
	@scripts/check-imports.sh

.PHONY: demo
demo: build deps ## Build, then apply examples/quickstart on the local Docker engine and show it running
	@scripts/quickstart-rootfs.sh examples/quickstart/agent/rootfs
	$(BIN) -chdir=examples/quickstart apply -auto-approve
	@echo
	$(BIN) -chdir=examples/quickstart status
	@echo
	@echo "Try: $(BIN) -chdir=examples/quickstart plan     (No changes.)"
	@echo "     $(BIN) -chdir=examples/quickstart destroy -auto-approve"

.PHONY: bench
bench: ## Run the benchmarks under bench/
	$(GO) test -run='^$$' -bench=. -benchmem ./bench/...

.PHONY: clean
clean: ## Remove build outputs
	rm -rf bin examples/quickstart/agent/rootfs
