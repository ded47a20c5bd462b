# Sluice's commands. See README.md.
GO ?= go
STATICCHECK_VERSION := v0.8.2
BIN := bin/sluice

.PHONY: build run cluster test sim bench fuzz lint mutants jepsen

build:
	$(GO) build -o $(BIN) ./cmd/sluice

# One broker on 127.0.0.1:9092 with data in ./data, configured by the example
# file (Kafka's keys, commented as in Kafka's own config/server.properties).
run: build
	./$(BIN) serve --config cmd/sluice/config/server.properties

# Three nodes on this machine, each broker and controller of one metadata
# quorum: PLAINTEXT on 127.0.0.1:9092, 9094 and 9096, CONTROLLER on 9093,
# 9095 and 9097, data in ./data-cluster/node-N, configured by
# cmd/sluice/config/cluster/server-N.properties. In the foreground, every
# line prefixed by its node; Ctrl-C stops all three, and so does any one
# of them failing.
cluster: build
	cmd/sluice/config/cluster/run ./$(BIN)

# Every test, with the expensive invariant checks compiled in (DESIGN.md
# section 9): the tests and the simulator always run with them; production
# builds (make build, make run, make bench) leave them out.
test:
	$(GO) test -count=1 -tags invariants ./...

# Long sweeps, with the expensive invariant checks compiled in: first
# SWARM_SEEDS (2,000) swarm seeds, each choosing its own cluster shape,
# workload and faults, in parallel processes (sluice sim sweep --swarm);
# then every seeded simulation and crash test with 10,000 seeds (the
# cluster simulations 2,000 per shape and workload). Hours, not minutes; CI
# runs the short sweeps of make test instead.
SWARM_SEEDS ?= 2000
sim:
	$(GO) build -tags invariants -o bin/sluice-invariants ./cmd/sluice
	bin/sluice-invariants sim sweep --swarm --seeds 1-$(SWARM_SEEDS)
	SLUICE_SEEDS=10000 SLUICE_CLUSTER_SEEDS=2000 $(GO) test -count=1 -tags invariants -run 'Sim|Crash|Determinism|Sweep' -timeout 6h ./...

# Package benchmarks one package at a time (-p 1), so that none competes
# with another for the CPU; then the benchmarks of cmd/sluice, which start
# real processes and print tables of figures and ratios: BenchmarkBroker
# (sluice serve, kfake and a sink server; see its doc comment for
# SLUICE_BENCH_MB, SLUICE_BENCH_LATENCY and SLUICE_BENCH_PERF), the cluster
# benchmarks (three nodes: controller failover, metadata scale) and
# BenchmarkClusterReplication (rf=3 against rf=1, latency, leader failover,
# CPU and flushes per GB; SLUICE_BENCH_REPL_MB, SLUICE_BENCH_KILLS) and
# BenchmarkClusterLatency (rf=1 and rf=3 latency beside the sync floor;
# SLUICE_BENCH_ROUNDS) and the group benchmarks (BenchmarkGroupCommits,
# BenchmarkGroupRebalance, BenchmarkGroupCoordinatorFailover; README.md).
bench:
	$(GO) test -p 1 -run '^$$' -bench . -benchmem $$($(GO) list ./... | grep -v '/cmd/sluice$$')
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./cmd/sluice

# Every fuzz target in the tree, one at a time (go test -fuzz takes one), each
# for FUZZTIME. Targets are found by name in the test files; a failing input
# is saved under its package's testdata/fuzz/<Target>/ to become a seed.
FUZZTIME ?= 20s
fuzz:
	@set -e; \
	for dir in $$(grep -l '^func Fuzz' $$(find . -name '*_test.go' -not -path './.git/*' -not -path '*/testdata/*') | xargs -n1 dirname | sort -u); do \
	  for target in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go | sed 's/^func //' | sort); do \
	    echo "== $$dir $$target for $(FUZZTIME)"; \
	    $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$dir; \
	  done; \
	done

# Mutation testing of the simulator: each deliberately broken variant of the
# broker (internal/mutants/<name>.patch) is applied to a temporary copy of the
# working tree, built with the invariants tag and swept; one line per mutant
# (caught or MISSED, the first failing seed and why, how many seeds failed),
# then "caught K of N". MUTANT_SEEDS (default 1-100), MUTANTS=name1,name2,
# MUTANT_JOBS=2, MUTANT_STOP_EARLY=1: see internal/mutants/README.md.
mutants:
	GO=$(GO) internal/mutants/run

# The real-process runner: three sluice serve processes of this build on
# 127.0.0.1 behind the runner's fault-injecting proxy, franz-go producers
# and consumers, a classic and a KIP-848 consumer group, and a two-minute
# schedule of every fault type (kill -9, SIGSTOP/SIGCONT, clean restarts,
# partitions one way and both, latency, loss, and full disks as root), then
# every partition read whole and checked, the groups' history too, as a
# simulated run is. The proxy network is the one that makes
# every type; namespaces (--network netns) are covered by the cmd/sluice
# tests. Its files go to jepsen-out/ (timeline.html, history, the nodes'
# logs); everything it starts is gone when it ends.
jepsen: build
	rm -rf jepsen-out
	$(BIN) jepsen --network proxy --duration 2m --seed $${SEED:-1} --groups classic:3,consumer:2 --out jepsen-out

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags invariants ./...
	$(GO) test -count=1 ./internal/guard/...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags invariants ./...
	@tidy=$$($(GO) mod tidy -diff); \
	  if [ -n "$$tidy" ]; then echo "go mod tidy would change go.mod or go.sum:"; echo "$$tidy"; exit 1; fi
