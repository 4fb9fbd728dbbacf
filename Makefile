# timeout-controller: run `make help` for the targets.
SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := help

CONTROLLER_GEN := go tool controller-gen
KUSTOMIZE := bin/kustomize
HELM := bin/helm
# golangci-lint, pinned in its own module (hack/lint) so that its many
# dependencies do not move those of helm and kustomize. The binary is named
# after its version (a directory of bin/, shared by worktrees): bumping
# hack/lint/go.mod builds a new one.
GOLANGCI_LINT_VERSION := $(shell awk '$$1 == "github.com/golangci/golangci-lint/v2" {print $$2}' hack/lint/go.mod)
GOLANGCI_LINT := bin/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint
# actionlint checks the GitHub workflows (and, with shellcheck on PATH, their
# run scripts); pinned in its own module too (hack/actionlint), cached per version.
ACTIONLINT_VERSION := $(shell awk '$$1 == "github.com/rhysd/actionlint" {print $$2}' hack/actionlint/go.mod)
ACTIONLINT := bin/actionlint-$(ACTIONLINT_VERSION)/actionlint
# promtool, built from the Prometheus module pinned in hack/promtool (its own
# module: Prometheus's dependencies stay out of go.mod), cached per version.
PROMTOOL_VERSION = $(shell awk '$$1 == "github.com/prometheus/prometheus" {print $$2}' hack/promtool/go.mod)
PROMTOOL = bin/promtool-$(PROMTOOL_VERSION)/promtool
# The image docker-build tags; config/manager/kustomization.yaml sets the one installed.
IMG ?= ghcr.io/amphitheatre-app/timeout-controller:v0.1.0
CONTAINER_TOOL ?= docker
GO_FILES = $(shell git ls-files '*.go')
# Builds etcd, kube-apiserver and kube-controller-manager on first use (about
# twelve minutes from an empty Go module cache), then reuses them.
ASSETS = $$(hack/control-plane.sh | tail -n 1)
S3_SERVER = $$(hack/s3-server.sh | tail -n 1)
# Prometheus, from the module version hack/promtool pins, for the traffic
# tests: built on first use into bin/prometheus-<version>/.
PROMETHEUS = $$(hack/prometheus.sh | tail -n 1)
# axe-core, from the npm registry at the version hack/axe pins, for the
# browser tests: installed on first use into bin/axe-core-<version>/.
AXE = $$(hack/axe.sh | tail -n 1)

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-15s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: generate
generate: ## Generate deepcopy code for api/.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: ## Generate the CRD and RBAC manifests under config/, and copy the CRDs and admission policy into the Helm chart.
	$(CONTROLLER_GEN) crd rbac:roleName=timeout-controller paths=./... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	rm -f charts/timeout-controller/crds/*.yaml && cp config/crd/bases/*.yaml charts/timeout-controller/crds/
	cp $(filter-out %/kustomization.yaml,$(wildcard config/admission/component/*.yaml)) charts/timeout-controller/files/admission/
	$(MAKE) --no-print-directory monitoring
	$(MAKE) --no-print-directory docs

.PHONY: fmt
fmt: ## Format the Go code.
	gofmt -w $(GO_FILES)

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: vet $(GOLANGCI_LINT) ## Check formatting, run go vet and golangci-lint (.golangci.yml).
	@out=$$(gofmt -l $(GO_FILES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GOLANGCI_LINT) run ./...

# About four minutes from a cold module and build cache, then cached in bin/.
$(GOLANGCI_LINT): hack/lint/go.mod hack/lint/go.sum
	mkdir -p $(dir $(GOLANGCI_LINT))
	cd hack/lint && go build -o ../../$(GOLANGCI_LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint

.PHONY: lint-workflows
lint-workflows: $(ACTIONLINT) ## Check the GitHub workflows (.github/workflows) with actionlint, and their run scripts with shellcheck if it is installed.
	@command -v shellcheck >/dev/null || echo "shellcheck not found: the workflows' run scripts are not checked (apt-get install shellcheck)"
	$(ACTIONLINT)

# Under half a minute from a cold module and build cache.
$(ACTIONLINT): hack/actionlint/go.mod hack/actionlint/go.sum
	mkdir -p $(dir $(ACTIONLINT))
	cd hack/actionlint && go build -trimpath -o ../../$(ACTIONLINT) github.com/rhysd/actionlint/cmd/actionlint

.PHONY: build
build: ## Build bin/timeout-controller.
	go build -o bin/timeout-controller ./cmd/timeout-controller

.PHONY: plugin
plugin: ## Build the kubectl plugin bin/kubectl-timeout (put bin/ on PATH, then `kubectl timeout`).
	go build -o bin/kubectl-timeout ./cmd/kubectl-timeout

.PHONY: tools
tools: $(KUSTOMIZE) $(HELM) ## Build the pinned tools of hack/tools (kustomize, helm) into bin/.

$(KUSTOMIZE): hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && go build -o ../../$(KUSTOMIZE) sigs.k8s.io/kustomize/kustomize/v5

$(HELM): hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && go build -o ../../$(HELM) helm.sh/helm/v4/cmd/helm

# The plugin's version in dist/timeout.yaml: the nearest v* tag, else the chart's appVersion.
VERSION ?= $(shell git describe --tags --match 'v*' 2>/dev/null || awk '$$1 == "appVersion:" {gsub(/"/, "", $$2); print $$2}' charts/timeout-controller/Chart.yaml)

.PHONY: dist
dist: ## Build kubectl-timeout for linux, darwin and windows on amd64 and arm64 into dist/ (tar.gz, checksums.txt) and the krew manifest dist/timeout.yaml.
	hack/dist.sh $(VERSION)

# The tag a release is made from: .github/workflows/release.yaml runs on a
# pushed tag v*; before pushing one, run `make release-dry-run RELEASE_TAG=vX.Y.Z`.
RELEASE_TAG ?= $(shell awk '$$1 == "appVersion:" {gsub(/"/, "", $$2); print $$2}' charts/timeout-controller/Chart.yaml)

.PHONY: release-check
release-check: ## Check that RELEASE_TAG (the chart's appVersion by default) is the version of the chart, its image and the install, and the release workflow against the chart.
	RELEASE_TAG=$(RELEASE_TAG) go test -count=1 ./test/release

.PHONY: chart-package
chart-package: $(HELM) ## Lint the Helm chart and package it into dist/ (after `make dist`, which empties dist/).
	$(HELM) lint --strict charts/timeout-controller
	$(HELM) package charts/timeout-controller --destination dist

.PHONY: release-dry-run
release-dry-run: $(HELM) $(ACTIONLINT) ## Run the release workflow's build steps for RELEASE_TAG here, pushing nothing (hack/release-dry-run.sh).
	hack/release-dry-run.sh $(RELEASE_TAG)

.PHONY: docker-build
docker-build: ## Build the controller image IMG with CONTAINER_TOOL (docker).
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: control-plane
control-plane: ## Build etcd, kube-apiserver and kube-controller-manager into bin/ (cached) and print their directory.
	@hack/control-plane.sh

.PHONY: prometheus
prometheus: ## Build Prometheus, the server the traffic tests query, from the version hack/promtool pins into bin/ (cached) and print its path.
	@hack/prometheus.sh

.PHONY: s3-server
s3-server: ## Build versitygw, the S3-compatible server the archive tests run, into bin/ (cached) and print its path.
	@hack/s3-server.sh

# The packages whose tests need no API server run with the race detector
# (cgo and a C compiler), except internal/sim: it plays 500 schedules in one
# goroutine, where -race finds nothing and makes it several times slower.
# The rest start a control plane, the demo or the bench, and run without it.
RACE_PKGS = ./api/... ./cmd/... $(filter-out %/internal/sim %/internal/testenv/browser,$(shell go list ./internal/...))
# test/dist checks the archives of `make dist`: six cross builds, 28
# CPU-minutes from a cold build cache (about 14 minutes on two idle cores),
# 1 minute warm. `make test-dist` runs it; `make test` does not.
# internal/testenv/browser drives Debian's Chromium, with axe-core from
# npm (hack/axe.sh), as the browser tests of test/integration do.
OTHER_PKGS = ./hack/... ./internal/testenv/browser $(filter-out %/test/dist %/test/e2e,$(shell go list ./test/...))

.PHONY: deps
deps: ## Install the Debian packages the tests need when some are missing (a C compiler, shellcheck, containerd, runc, CNI plugins, iptables, conntrack, Chromium, Node.js): as root with apt-get, else print the apt-get command and fail (hack/deps.sh).
	@hack/deps.sh

.PHONY: test
test: deps tools test-rules ## Run every test: unit (with -race), fuzz seeds, the alert rules, and integration against a real API server, a real S3 server and a real Prometheus.
	go test -race -count=1 $(RACE_PKGS)
	go test -count=1 ./internal/sim
	assets=$(ASSETS) && s3=$(S3_SERVER) && prom=$(PROMETHEUS) && axe=$(AXE) && KUBEBUILDER_ASSETS="$$assets" TIMEOUT_S3_SERVER="$$s3" TIMEOUT_PROMETHEUS="$$prom" TIMEOUT_AXE="$$axe" go test -count=1 $(OTHER_PKGS)
	$(MAKE) --no-print-directory e2e

# The one-node cluster: the control plane's binaries plus kube-scheduler,
# kubelet, kube-proxy and kubectl (about four more minutes from a cold
# cache), with Debian's containerd, runc and CNI plugins. Needs root.
NODE_ASSETS = $$(hack/control-plane.sh --node | tail -n 1)

.PHONY: cluster
cluster: deps ## Start a one-node cluster built from source (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, containerd); Ctrl-C tears it down. Needs root.
	assets=$(NODE_ASSETS) && go run ./hack/cluster -assets "$$assets"

.PHONY: image
image: ## Build the controller's image IMG from a static binary, with no container engine, into bin/timeout-controller-image.tar (docker-archive: `ctr images import` or `docker load`).
	go run ./hack/image -tag $(IMG) -o bin/timeout-controller-image.tar

.PHONY: e2e
e2e: deps tools ## Install the image and the chart, then config/default, on the one-node cluster and check the whole job there (test/e2e). Needs root.
	assets=$(NODE_ASSETS) && TIMEOUT_E2E_ASSETS="$$assets" go test -count=1 -timeout=30m -v ./test/e2e

.PHONY: test-dist
test-dist: dist ## Build the krew archives (make dist) and check them and the manifest.
	go test -count=1 ./test/dist

.PHONY: monitoring
monitoring: ## Generate the PrometheusRule of config/components/prometheus and the chart's copies of the rules and dashboard.
	{ echo '# Generated by `make manifests` from config/prometheus/rules.yaml: edit that file.'; \
	  printf 'apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: timeout-controller\n  namespace: timeout-system\nspec:\n'; \
	  sed -e '/^#/d' -e 's/^/  /' config/prometheus/rules.yaml; } > config/components/prometheus/prometheusrule.yaml
	mkdir -p charts/timeout-controller/files/prometheus charts/timeout-controller/files/grafana
	cp config/prometheus/rules.yaml charts/timeout-controller/files/prometheus/
	cp config/grafana/timeout-controller.json charts/timeout-controller/files/grafana/

.PHONY: docs
docs: ## Rewrite the tables of docs/reference that restate the code: flags, metrics, RBAC and the CRDs' fields (hack/docs).
	go run ./hack/docs

.PHONY: docs-check
docs-check: ## Fail when a page is stale: a generated table, a link or anchor, or a flag or its default, Event reason, metric, condition reason, annotation, CRD field or event type the code and the docs disagree on.
	go run ./hack/docs -check

.PHONY: test-rules
test-rules: $(PROMTOOL) ## Check the alert rules and run their unit tests (config/prometheus/rules_test.yaml) with promtool.
	$(PROMTOOL) check rules config/prometheus/rules.yaml
	$(PROMTOOL) test rules config/prometheus/rules_test.yaml

$(PROMTOOL): hack/promtool/go.mod hack/promtool/go.sum
	cd hack/promtool && go build -trimpath -o ../../$(PROMTOOL) github.com/prometheus/prometheus/cmd/promtool

.PHONY: test-unit
test-unit: ## Run the unit tests only (no API server), with the race detector.
	go test -race -count=1 $(RACE_PKGS)
	go test -count=1 ./internal/sim

# How many schedules `make simulate` plays, and from which seed (fresh when empty).
SCHEDULES ?= 10000
SEED ?=

.PHONY: simulate
simulate: ## Play SCHEDULES random schedules of the simulation (internal/sim) from fresh seeds, or from SEED; print the rate and each violation with its shortest schedule. SIM_ALL=1 turns the disabled inputs on.
	SIMULATE=$(SCHEDULES) SIM_SEED=$(SEED) go test ./internal/sim -run '^TestSimulate$$' -count=1 -timeout 2h -v

.PHONY: fuzz
fuzz: ## Fuzz the duration and annotation parsers for a minute each.
	go test ./internal/expiry -run '^$$' -fuzz FuzzParseDuration -fuzztime 60s
	go test ./internal/expiry -run '^$$' -fuzz FuzzCompute -fuzztime 60s

# Extra flags for hack/mutate, e.g. MUTATE_FLAGS="-pkg internal/match -v" or
# "-run plan.go"; `go run ./hack/mutate -help` lists them.
MUTATE_FLAGS ?=

.PHONY: mutate
mutate: ## Flip comparisons and clamps, drop operands of && and ||, and force booleans in the packages that hold the promises (expiry, decide, match, outbox, recipients, the evaluation of internal/rules the plugin and the links share, sleep, usage) one at a time, run their tests against each, and fail below 95% killed (hack/mutate; MUTATE_FLAGS). Not part of make test.
	nice -n 10 go run ./hack/mutate -min 95 $(MUTATE_FLAGS)

.PHONY: demo
demo: ## Start a local control plane (with kube-controller-manager) and tell the product's story scene by scene: reminders, an extension, sleep and wake, reclaim, a digest, the archive, use, links (Ctrl-C stops it).
	assets=$(ASSETS) && KUBEBUILDER_ASSETS="$$assets" go run ./hack/demo

.PHONY: bench
bench: ## Measure lag, memory, CPU, cold start and API calls on a local control plane; e.g. BENCH_FLAGS="-n 10000 -expiring 1000".
	assets=$(ASSETS) && KUBEBUILDER_ASSETS="$$assets" go run ./hack/bench $(BENCH_FLAGS)

# The file `make dashboard-png` renders; write it with BENCH_FLAGS="... -series $(SERIES)".
SERIES ?= bench-series.jsonl

.PHONY: dashboard-png
dashboard-png: ## Render docs/dashboard.png, the dashboard's panels, from the metrics a bench run recorded (BENCH_FLAGS="... -series bench-series.jsonl").
	cd hack/dashboard && go run . -series $(abspath $(SERIES)) -out ../../docs/dashboard.png -title "$(TITLE)"

.PHONY: verify
verify: lint lint-workflows ## Fail when generated files are stale or go mod tidy would change anything.
	$(MAKE) --no-print-directory docs-check
	$(MAKE) --no-print-directory generate manifests
	@git diff --exit-code -- api config charts || { echo "generated files are stale: run make generate manifests and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api config charts)" || { git status --porcelain -- api config charts; echo "untracked generated files: commit them"; exit 1; }
	go mod tidy -diff
	cd hack/tools && go mod tidy -diff
	cd hack/lint && go mod tidy -diff
	cd hack/actionlint && go mod tidy -diff
	cd hack/promtool && go mod tidy -diff
	cd hack/dashboard && go mod tidy -diff
	cd hack/s3 && go mod tidy -diff
