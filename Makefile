# Shoal — build, test, examples, bench, lint.
GO      ?= go
BIN     ?= bin
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Example plugins: every examples/* folder with a plugin.toml.
PLUGINS := $(patsubst %/plugin.toml,%,$(wildcard examples/*/plugin.toml))

.PHONY: all build test vet gotest examples interop bench lint clean

all: build

build:
	$(GO) build -o $(BIN)/shoal ./cmd/shoal
	$(GO) build -o $(BIN)/shoal-mcp ./cmd/shoal-mcp

# What CI runs: vet, the race-enabled test suite (it builds and exercises
# the example plugins itself), and the TypeScript SDK interop test when
# node is present.
test: vet examples gotest interop

vet:
	$(GO) vet ./...

gotest:
	$(GO) test -race -timeout 20m ./...

# Each example plugin's .wasm lands beside its manifest, ready for
# --plugin-dir examples/NAME.
examples:
	@for d in $(PLUGINS); do \
		name=$$(basename $$d); \
		echo "wasm $$d/$$name.wasm"; \
		GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o $$d/$$name.wasm ./$$d || exit 1; \
	done

interop:
	@if command -v node >/dev/null 2>&1 && [ -f test/interop/package.json ]; then \
		$(GO) build -o $(BIN)/shoal-mcp ./cmd/shoal-mcp && \
		cd test/interop && npm install --no-audit --no-fund --silent && SHOAL_MCP=../../$(BIN)/shoal-mcp node interop.mjs; \
	else \
		echo "interop: SKIPPED (node not found or test/interop missing): the TypeScript SDK check did not run"; \
	fi

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...

lint: vet
	$(GO) run $(STATICCHECK) ./...

clean:
	rm -rf $(BIN)
	rm -f $(foreach d,$(PLUGINS),$(d)/$(notdir $(d)).wasm)
