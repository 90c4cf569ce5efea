# Shoal — build, test, examples, bench, lint.
GO      ?= go
BIN     ?= bin
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Example plugins: every examples/* folder with a plugin.toml.
PLUGINS := $(patsubst %/plugin.toml,%,$(wildcard examples/*/plugin.toml))

.PHONY: all build test vet gotest examples interop bench lint clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -o $(BIN)/shoal ./cmd/shoal
	$(GO) build -o $(BIN)/shoal-kernel ./cmd/shoal-kernel
	$(GO) build -o $(BIN)/shoal-mcp ./cmd/shoal-mcp

# What CI runs: vet, the example plugins, and the race-enabled test suite
# (which also runs the TypeScript SDK interop test in test/interop when node
# is present, and says SKIP when it is not).
test: vet examples gotest

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

# The TypeScript SDK interop test alone, verbose.
interop:
	$(GO) test -v -count=1 ./test/interop

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...

lint: vet
	$(GO) run $(STATICCHECK) ./...

clean:
	rm -rf $(BIN)
	rm -f $(foreach d,$(PLUGINS),$(d)/$(notdir $(d)).wasm)
