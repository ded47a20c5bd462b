# Sluice's commands. See README.md.
GO ?= go
STATICCHECK_VERSION := v0.8.2
BIN := bin/sluice

.PHONY: build run test sim bench fuzz lint

build:
	$(GO) build -o $(BIN) ./cmd/sluice

run: build
	./$(BIN) serve

test:
	$(GO) test -count=1 ./...

sim:
	SLUICE_SEEDS=10000 $(GO) test -count=1 -tags invariants -run 'Sim|Crash|Determinism|Sweep' -timeout 80m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

fuzz:
	@echo "no fuzz targets yet"

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -count=1 ./internal/guard/...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
