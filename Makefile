# Cronix — the front door. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
BIN := bin/cronix
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/cronix/cronix/buildinfo.Version=$(VERSION)
DATA_DIR ?= ./data
HTTP_ADDR ?= 127.0.0.1:8080
# bench knobs (issue 12's acceptance values by default); a quick smoke run:
#   make bench BENCH_SECONDS=20 BENCH_HTTP_RATES=200 BENCH_SHELL_RATES=100 BENCH_SCALE_JOBS=10000 BENCH_SCALE_API_JOBS=1000
BENCH_SECONDS ?= 180
BENCH_WORKLOADS ?= http,shell,scale,spread
BENCH_HTTP_RATES ?= 1000,2000,3000,4000,5000
BENCH_SHELL_RATES ?= 500
BENCH_FLOOR_SECONDS ?= 60
# the fork floor's window; 0 = the shell row's own (BENCH_SECONDS), so line 3 compares p99s over windows of one length
BENCH_FORK_FLOOR_SECONDS ?= 0
BENCH_SCALE_JOBS ?= 100000
BENCH_SCALE_API_JOBS ?= 10000
BENCH_SCALE_EVERY_SECOND ?= 200
BENCH_SPREAD_RATES ?= 1500
BENCH_LABEL ?=
BENCH_SOAK_RATE ?= 500
BENCH_SOAK_DURATION ?= 30m
FAILOVER_TRIALS ?= 20
# make bench-failover-scale FAILOVER_SCALE_DB='postgres://postgres@127.0.0.1:5432/cronix_failover?sslmode=disable'
FAILOVER_SCALE_DB ?=
FAILOVER_SCALE_JOBS ?= 100000
FAILOVER_SCALE_TRIALS ?= 5
# make bench-retention RETENTION_JOBS=200 RETENTION_SECONDS=60 RETENTION_BACKLOG=300000 RETENTION_ROUNDS=1
RETENTION_JOBS ?= 200
RETENTION_SECONDS ?= 60
RETENTION_BACKLOG ?= 300000
RETENTION_ROUNDS ?= 1
RETENTION_HANDLER ?= shell
RETENTION_NOTE ?=
GOLANGCI_VERSION ?= v2.6.2
FUZZ_TIME ?= 15s

.PHONY: help build run run-ha test test-race test-ui ui bench bench-speed bench-soak bench-failover bench-failover-scale bench-retention lint fmt clean docs

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-12s %s\n", $$1, $$2}'

build: ## build bin/cronix
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) .

run: build ## start Cronix standalone (embedded etcd, SQLite, one server, one node) with data in ./data
	$(BIN) standalone --data-dir $(DATA_DIR) --http-addr $(HTTP_ADDR)

run-ha: build ## local HA demo: cronix etcd + 3 server replicas (HTTP 8081-8083, raft 7001-7003) + 1 node; SQLite in ./data-ha (CRONIX_HA_DB=postgres://... to use PostgreSQL)
	BIN=$(BIN) ./scripts/run-ha.sh

test: ## vet, the web admin's component tests, every Go test with the race detector (store suite on PostgreSQL/MySQL when CRONIX_TEST_*_DSN are set; the browser test in integration/), then bounded fuzzing of the schedule parser, the etcd record decoders and the API's JSON bodies
	$(GO) vet ./...
	$(MAKE) test-ui
	$(GO) test -race -count=1 -timeout 20m ./...
	GO=$(GO) bash scripts/fuzz.sh FuzzParse ./server/schedule/ $(FUZZ_TIME)
	GO=$(GO) bash scripts/fuzz.sh FuzzOpenRecord ./cluster/ $(FUZZ_TIME)
	GO=$(GO) bash scripts/fuzz.sh FuzzJSONBodies ./server/api/ $(FUZZ_TIME)

ui: ## rebuild the web admin (ui/web, needs Node 20+) into ui/dist, which the binary embeds; commit the result
	cd ui/web && npm ci --no-audit --no-fund && npm run build
	node ui/web/scripts/bundle-size.mjs 350

test-ui: ## the web admin's component tests (Vitest); skipped without ui/web/node_modules unless CI=true
	@if [ -d ui/web/node_modules ]; then cd ui/web && npx vitest run; \
	elif [ "$$CI" = true ]; then echo "ui/web/node_modules missing: run npm ci in ui/web" >&2; exit 1; \
	else echo "skipping the web admin's component tests: no ui/web/node_modules (cd ui/web && npm ci)"; fi

bench: build ## speed table (http BENCH_HTTP_RATES, shell BENCH_SHELL_RATES + fork floor, scale BENCH_SCALE_JOBS, spread BENCH_SPREAD_RATES on 3 nodes; BENCH_SECONDS each) and HA failover gap (FAILOVER_TRIALS kills); writes docs/benchmarks.md
	$(GO) run ./bench/speed --binary $(BIN) --workloads $(BENCH_WORKLOADS) --seconds $(BENCH_SECONDS) \
		--http-rates $(BENCH_HTTP_RATES) --shell-rates $(BENCH_SHELL_RATES) --floor-seconds $(BENCH_FLOOR_SECONDS) --fork-floor-seconds $(BENCH_FORK_FLOOR_SECONDS) \
		--scale-jobs $(BENCH_SCALE_JOBS) --scale-api-jobs $(BENCH_SCALE_API_JOBS) --scale-every-second $(BENCH_SCALE_EVERY_SECOND) \
		--spread-rates $(BENCH_SPREAD_RATES) --label "$(BENCH_LABEL)" --out docs/benchmarks.md
	$(GO) run ./bench/failover --binary $(BIN) --trials $(FAILOVER_TRIALS) --out docs/benchmarks.md

bench-speed: build ## only the speed table (same knobs as bench, no failover)
	$(GO) run ./bench/speed --binary $(BIN) --workloads $(BENCH_WORKLOADS) --seconds $(BENCH_SECONDS) \
		--http-rates $(BENCH_HTTP_RATES) --shell-rates $(BENCH_SHELL_RATES) --floor-seconds $(BENCH_FLOOR_SECONDS) --fork-floor-seconds $(BENCH_FORK_FLOOR_SECONDS) \
		--scale-jobs $(BENCH_SCALE_JOBS) --scale-api-jobs $(BENCH_SCALE_API_JOBS) --scale-every-second $(BENCH_SCALE_EVERY_SECOND) \
		--spread-rates $(BENCH_SPREAD_RATES) --label "$(BENCH_LABEL)" --out docs/benchmarks.md

bench-soak: build ## opt-in soak (refused in 15 s where a plain fork floor at its rate falls behind): BENCH_SOAK_RATE shell jobs/s for BENCH_SOAK_DURATION, RSS every 10 s, its slope and 5-min means, and whether the host stayed quiet and the scheduler kept up (else not an acceptance figure); writes docs/benchmarks.md
	$(GO) run ./bench/speed --binary $(BIN) --soak --soak-rate $(BENCH_SOAK_RATE) --soak-duration $(BENCH_SOAK_DURATION) \
		--label "$(BENCH_LABEL)" --out docs/benchmarks.md

bench-failover: build ## only the HA failover gap: kill the leader FAILOVER_TRIALS times
	$(GO) run ./bench/failover --binary $(BIN) --trials $(FAILOVER_TRIALS) --out docs/benchmarks.md

bench-failover-scale: build ## failover gap with FAILOVER_SCALE_JOBS more hourly/daily jobs on the PostgreSQL of FAILOVER_SCALE_DB (a database it may fill; required)
	@test -n "$(FAILOVER_SCALE_DB)" || { echo "set FAILOVER_SCALE_DB to a PostgreSQL DSN of an empty database" >&2; exit 2; }
	$(GO) run ./bench/failover --binary $(BIN) --trials $(FAILOVER_SCALE_TRIALS) --idle-jobs $(FAILOVER_SCALE_JOBS) \
		--db "$(FAILOVER_SCALE_DB)" --out docs/benchmarks.md

bench-retention: build ## lateness of RETENTION_JOBS jobs firing every second with and without retention deleting RETENTION_BACKLOG old runs; writes docs/benchmarks.md
	$(GO) run ./bench/retention --binary $(BIN) --jobs $(RETENTION_JOBS) --seconds $(RETENTION_SECONDS) --backlog $(RETENTION_BACKLOG) --rounds $(RETENTION_ROUNDS) --handler $(RETENTION_HANDLER) --note "$(RETENTION_NOTE)" --out docs/benchmarks.md

lint: ## gofmt, go vet and golangci-lint
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	@command -v golangci-lint >/dev/null || $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)
	golangci-lint run ./...

fmt: ## gofmt every Go file of the repository
	gofmt -w $$(git ls-files '*.go')

docs: build ## regenerate docs/configuration.md from the binary's flags
	$(BIN) docs configuration > docs/configuration.md

clean: ## remove build output (not ./data)
	rm -rf bin
