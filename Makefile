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
# The image docker-build tags; config/manager/kustomization.yaml sets the one installed.
IMG ?= ghcr.io/amphitheatre-app/timeout-controller:v0.1.0
CONTAINER_TOOL ?= docker
GO_FILES = $(shell git ls-files '*.go')
# Builds etcd and kube-apiserver on first use (about six minutes), then reuses them.
ASSETS = $$(hack/control-plane.sh | tail -n 1)

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
	cp config/admission/component/policy.yaml config/admission/component/binding.yaml charts/timeout-controller/files/admission/

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

.PHONY: docker-build
docker-build: ## Build the controller image IMG with CONTAINER_TOOL (docker).
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: control-plane
control-plane: ## Build etcd and kube-apiserver into bin/ (cached) and print their directory.
	@hack/control-plane.sh

# The packages whose tests need no API server run with the race detector
# (cgo and a C compiler), except internal/sim: it plays 500 schedules in one
# goroutine, where -race finds nothing and makes it several times slower.
# The rest start a control plane, the demo or the bench, and run without it.
RACE_PKGS = ./api/... ./cmd/... $(filter-out %/internal/sim,$(shell go list ./internal/...))
OTHER_PKGS = ./hack/... ./test/...

.PHONY: test
test: tools ## Run every test: unit (with -race), fuzz seeds, and integration against a real API server.
	go test -race -count=1 $(RACE_PKGS)
	go test -count=1 ./internal/sim
	assets=$(ASSETS) && KUBEBUILDER_ASSETS="$$assets" go test -count=1 $(OTHER_PKGS)

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

.PHONY: demo
demo: ## Start a local control plane and watch Playbooks expire (Ctrl-C stops it).
	assets=$(ASSETS) && KUBEBUILDER_ASSETS="$$assets" go run ./hack/demo

.PHONY: bench
bench: ## Measure lag, memory, CPU, cold start and API calls on a local control plane; e.g. BENCH_FLAGS="-n 10000 -expiring 1000".
	assets=$(ASSETS) && KUBEBUILDER_ASSETS="$$assets" go run ./hack/bench $(BENCH_FLAGS)

.PHONY: verify
verify: lint ## Fail when generated files are stale or go mod tidy would change anything.
	$(MAKE) --no-print-directory generate manifests
	@git diff --exit-code -- api config charts || { echo "generated files are stale: run make generate manifests and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api config charts)" || { git status --porcelain -- api config charts; echo "untracked generated files: commit them"; exit 1; }
	go mod tidy -diff
	cd hack/tools && go mod tidy -diff
	cd hack/lint && go mod tidy -diff
