# hyperbatch — the README's two commands are `make run` (local cluster + hyperbatch + demo) and
# `make test` (unit + integration against a real kube-apiserver). Both install what they need.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

BIN        := $(CURDIR)/bin
GO         ?= go
NODES      ?= 16
# DISCOVER=1: `make run` lets the manager's HyperNode discovery build the tree from the node labels.
DISCOVER   ?=
# REAL_NODES=2: `make run` also starts that many real nodes (kubelet + containerd + runc, one
# kube-proxy; root, and hack/realnodes-prereqs.sh once). docs/development.md, "Real nodes".
REAL_NODES ?=
# CHART=1 (with REAL_NODES): hyperbatch's manager and scheduler are installed by `helm install
# charts/hyperbatch` on the real nodes instead of running as host processes. docs/development.md, "Chart mode".
CHART      ?=
NODE_TOOLS := kubelet kube-proxy kube-scheduler containerd containerd-shim-runc-v2 ctr cni-bridge cni-host-local cni-loopback
# Each command builds what it uses (docs/development.md, "Cold start"):
# RUN_TOOLS: what `make run`'s single cluster runs (hack/localcluster: control plane, kwok, Volcano's
# controllers and webhooks, the JobSet controller, Kubeflow Trainer's controller manager) and
# controller-gen, which generates Volcano's CRDs.
RUN_TOOLS  := etcd kube-apiserver kube-controller-manager kubectl kwok controller-gen vc-controller-manager vc-webhook-manager jobset-controller trainer-controller-manager
# KARMADA_TOOLS: added by `make run-multicluster` and test/integration/multicluster.
KARMADA_TOOLS := karmada-aggregated-apiserver karmada-webhook karmada-controller-manager karmada-scheduler
TEST_TOOLS := $(RUN_TOOLS) helm vc-scheduler $(KARMADA_TOOLS)
GOTEST_FLAGS ?= -count=1 -timeout=40m
FUZZTIME   ?= 10s
# Benchmarks (bench/) are compiled by go vet and run by `make bench`, not by `make test`.
PKGS       ?= $(shell $(GO) list -tags e2e ./... | grep -v /bench/)
# The previous minor's control plane (docs/compatibility.md): make test runs everything on the
# kube-apiserver/kube-controller-manager of hack/tools/k8s (1.37), then the scheduler and webhook
# integration suites, the admission policy suite and the e2e journeys again on those of hack/tools/k8s136 (1.36), from bin/k8s-1.36/
# (the 1.36 binaries plus links to every other tool, manager and scheduler).
BIN_136    := $(BIN)/k8s-1.36
# The 1.36 pass uses bin/kubectl (1.37): kubectl supports one minor of skew either way, so no kubectl-1.36
# is built. kube-controller-manager may not be newer than kube-apiserver, so the 1.36 pass keeps its own.
TOOLS_136  := kube-apiserver-1.36 kube-controller-manager-1.36
PKGS_136   ?= ./test/integration/scheduler/ ./test/integration/webhook/ ./test/integration/admissionpolicy/
E2E_RUN_136 ?= ^TestJourney
# The Kubernetes version bin/scheduler reports (kube-scheduler's --version and /version): the
# k8s.io/kubernetes version in go.mod, which the chart's kubeVersion and docs/compatibility.md follow.
SCHED_K8S  := $(shell awk '$$1=="k8s.io/kubernetes"{print $$2; exit}' go.mod)
SCHED_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(SCHED_K8S) -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(SCHED_K8S))) -X k8s.io/component-base/version.gitTreeState=clean

export KUBEBUILDER_ASSETS := $(BIN)
export HYPERBATCH_BIN := $(BIN)

.PHONY: build
build: ## Build bin/manager, bin/scheduler and the kubectl plugin bin/kubectl-hyperbatch.
	$(GO) build -o $(BIN)/manager ./cmd/manager
	$(GO) build -ldflags "$(SCHED_LDFLAGS)" -o $(BIN)/scheduler ./cmd/scheduler
	$(GO) build -o $(BIN)/kubectl-hyperbatch ./cmd/kubectl-hyperbatch

# make images: the chart's image, the e2e worker and the pause image as OCI archives, without Docker.
IMAGES_DIR := $(CURDIR)/_output/images
IMAGE_TAG  ?= dev
STATIC     := CGO_ENABLED=0 $(GO) build -trimpath

.PHONY: images
images: ## Build hyperbatch's image (manager + scheduler), the e2e worker and the pause image as OCI archives into _output/images/ (no Docker: hack/tools/images), each verified.
	mkdir -p $(IMAGES_DIR)/bin
	$(STATIC) -ldflags "-s -w" -o $(IMAGES_DIR)/bin/manager ./cmd/manager
	$(STATIC) -ldflags "-s -w $(SCHED_LDFLAGS)" -o $(IMAGES_DIR)/bin/scheduler ./cmd/scheduler
	$(STATIC) -ldflags "-s -w" -o $(IMAGES_DIR)/bin/worker ./hack/images/worker
	$(STATIC) -ldflags "-s -w" -o $(IMAGES_DIR)/bin/pause ./hack/images/pause
	cd hack/tools/images && $(GO) run . --bin $(IMAGES_DIR)/bin --out $(IMAGES_DIR) --tag $(IMAGE_TAG)
	@# A running cluster with real nodes gets the new archives in every node's containerd.
	$(GO) run ./hack/localcluster load-images

.PHONY: krew-archive
krew-archive: ## Build the kubectl plugin's krew archive for this platform into _output/krew/ and print its sha256 (plugins/hyperbatch.yaml).
	mkdir -p _output/krew/stage
	CGO_ENABLED=0 $(GO) build -o _output/krew/stage/kubectl-hyperbatch ./cmd/kubectl-hyperbatch
	tar -C _output/krew/stage -czf _output/krew/kubectl-hyperbatch_$$($(GO) env GOOS)_$$($(GO) env GOARCH).tar.gz kubectl-hyperbatch
	sha256sum _output/krew/kubectl-hyperbatch_*.tar.gz

.PHONY: tools
tools: ## Build the development binaries (etcd, kube-apiserver, kube-controller-manager, kubectl, kwok, controller-gen, helm, golangci-lint, Volcano's controller-manager, webhook-manager and scheduler, the JobSet controller, Kubeflow Trainer's controller manager, Karmada's) into bin/.
	hack/tools.sh

.PHONY: test-tools
test-tools:
	hack/tools.sh $(TEST_TOOLS)

# bin/k8s-1.36/: the 1.36 control plane and links to every other tool (and kwok's stage file), manager and scheduler.
.PHONY: test-tools-136
test-tools-136: test-tools tools-136-only

# tools-136-only: the 1.36 binaries and bin/k8s-1.36's links, without re-checking TEST_TOOLS (make test
# builds it in the background while the 1.37 pass runs; the links point at binaries test-tools made).
.PHONY: tools-136-only
tools-136-only:
	hack/tools.sh $(TOOLS_136)
	for t in $(filter-out kube-apiserver kube-controller-manager,$(TEST_TOOLS)) kwok-stages.yaml manager scheduler; do ln -sfn ../$$t $(BIN_136)/$$t; done

.PHONY: run-tools
run-tools:
	hack/tools.sh $(RUN_TOOLS)

.PHONY: generate
generate: ## Regenerate deepcopy code (api/, scheduler-plugin/args), our CRD (config/crd/ and the chart's crds/), the manager's RBAC (config/rbac) and the webhook manifests.
	hack/tools.sh controller-gen
	$(BIN)/controller-gen object paths=./api/... paths=./scheduler-plugin/args/...
	$(BIN)/controller-gen rbac:roleName=hyperbatch-manager paths=./cmd/manager/... paths=./controllers/... paths=./webhook/... paths=./certs/... output:rbac:dir=config/rbac
	$(BIN)/controller-gen crd paths=./api/... output:crd:dir=config/crd
	cp config/crd/*.yaml charts/hyperbatch/crds/
	$(GO) run ./webhook/cmd/genmanifests
	$(GO) run ./webhook/cmd/genmanifests -chart

.PHONY: verify-generate
verify-generate: generate ## Fail when generated files are out of date.
	@git diff --quiet -- api config charts scheduler-plugin/args || { git --no-pager diff --stat -- api config charts scheduler-plugin/args; echo "generated files are stale: run 'make generate' and commit the result"; exit 1; }

.PHONY: crds
crds: ## Generate Volcano's CRDs from volcano.sh/apis (controller-gen) and gather Karmada's and JobSet's from the Go module cache into _output/crds/.
	hack/crds.sh

.PHONY: test
test: test-tools crds build ## Unit, integration (real etcd + kube-apiserver) and local e2e tests on the 1.37 control plane, then the scheduler/webhook integration suites and e2e journeys on 1.36; one summary.
	$(GO) vet -tags e2e ./...
	@# The 1.36 control plane builds at nice 19 while the 1.37 pass runs: it takes only the CPU the
	@# tests leave idle (they wait on apiservers much of the time), and the 1.36 pass waits for it.
	mkdir -p _output; rm -f _output/tools-136.rc
	{ nice -n 19 $(MAKE) --no-print-directory tools-136-only >_output/tools-136.log 2>&1; echo $$? >_output/tools-136.rc; } &
	{ $(GO) test -json -tags e2e $(GOTEST_FLAGS) $(PKGS) || true; \
	  while [ ! -f _output/tools-136.rc ]; do sleep 2; done; \
	  cat _output/tools-136.log >&2; \
	  if [ "$$(cat _output/tools-136.rc)" != 0 ]; then echo "the 1.36 control plane failed to build (_output/tools-136.log); the 1.36 pass cannot run" >&2; exit 1; fi; \
	  echo "=== suite: kube 1.36"; \
	  KUBEBUILDER_ASSETS=$(BIN_136) HYPERBATCH_BIN=$(BIN_136) $(GO) test -json -tags e2e $(GOTEST_FLAGS) $(PKGS_136) || true; \
	  KUBEBUILDER_ASSETS=$(BIN_136) HYPERBATCH_BIN=$(BIN_136) $(GO) test -json -tags e2e $(GOTEST_FLAGS) -run '$(E2E_RUN_136)' ./test/e2e/ || true; \
	} | $(GO) run ./hack/testsummary

.PHONY: test-e2e
test-e2e: test-tools crds build ## Only the e2e suite (set HYPERBATCH_E2E_KUBECONFIG to use a running cluster).
	$(GO) test -json -tags e2e $(GOTEST_FLAGS) ./test/e2e/... | $(GO) run ./hack/testsummary

.PHONY: run
run: run-tools crds build $(if $(REAL_NODES),node-tools images) $(if $(CHART),chart-tools) ## Start the local cluster with hyperbatch and a demo workload (REAL_NODES=2 adds real nodes, CHART=1 installs hyperbatch on them with helm; stop it with `make down`).
	$(GO) run ./hack/localcluster up --nodes $(NODES) --bin $(BIN) $(if $(DISCOVER),--discover) $(if $(REAL_NODES),--real-nodes $(REAL_NODES)) $(if $(CHART),--chart)

.PHONY: chart-tools
chart-tools:
	hack/tools.sh helm

.PHONY: node-tools
node-tools: ## Build the real nodes' kubelet, kube-proxy, kube-scheduler, containerd (with its shim and ctr) and CNI plugins into bin/ (minutes the first time).
	hack/tools.sh $(NODE_TOOLS)

.PHONY: run-multicluster
run-multicluster: run-tools crds build ## Start a Karmada control plane and two member clusters with hyperbatch, run a HyperJob across them (stop with `make down`).
	hack/tools.sh $(KARMADA_TOOLS)
	$(GO) run ./hack/localcluster up --multicluster --bin $(BIN) $(if $(PORT_BASE),--port-base $(PORT_BASE))

.PHONY: down
down: ## Stop everything `make run` or `make run-multicluster` started.
	$(GO) run ./hack/localcluster down

.PHONY: fuzz
fuzz: ## Run every fuzz target in the repository for FUZZTIME each (default 10s): make fuzz FUZZTIME=1m
	FUZZTIME=$(FUZZTIME) GO=$(GO) hack/fuzz.sh

.PHONY: lint
lint: ## golangci-lint (config in .golangci.yml).
	hack/tools.sh golangci-lint
	$(BIN)/golangci-lint run ./...

.PHONY: bench-tools
bench-tools: ## What only the benchmarks need (never make test or CI): Kueue's manager (hack/tools/kueue) and its CRDs and manifests (_output/kueue/).
	hack/tools.sh kueue-manager
	hack/crds.sh kueue

.PHONY: bench-peers
bench-peers: test-tools crds build bench-tools ## The peers benchmark alone (hyperbatch, Volcano, Volcano without network-topology-aware, Kueue TAS, the stock profile); HB_PEERS_SIZES=1000 for one size.
	$(GO) test -run '^$$' -bench '^BenchmarkPeers$$' -benchtime=1x -timeout 120m ./bench/scheduler/

.PHONY: bench
bench: test-tools crds build bench-tools ## Benchmarks under bench/ (results and ratios land in bench/results/).
	mkdir -p bench/results
	$(GO) test -run '^$$' -bench . -benchmem ./bench/defaults/ | tee bench/results/defaults.txt
	$(GO) test -run '^$$' -bench 'AdmissionLatency|AdmissionPeers|PodBurst' -benchtime=1x -timeout 40m ./bench/webhook/
	$(GO) test -run '^$$' -bench 'AdmissionModes|AdmissionWorkloads' -benchtime=1x -timeout 60m ./bench/webhook/
	$(GO) test -run '^$$' -bench 'DomainChoice$$|TreeBuild|NodeAdd|HyperNodeUpdate' -benchmem ./bench/scheduler/
	grep '^#' bench/results/subgroups.txt > bench/results/subgroups.txt.new
	$(GO) test -run '^$$' -bench '^BenchmarkDomainChoiceSubGroups$$' -benchmem -timeout 20m ./bench/scheduler/ | tee -a bench/results/subgroups.txt.new
	mv bench/results/subgroups.txt.new bench/results/subgroups.txt
	$(GO) test -run '^$$' -bench 'SchedulingThroughput' -benchtime=1x -timeout 60m ./bench/scheduler/
	$(GO) test -run '^$$' -bench 'PlacementUnderStatusWrites' -benchtime=1x -timeout 20m ./bench/scheduler/
	$(GO) test -run '^$$' -bench 'PreemptionLatency' -benchtime=1x -timeout 30m ./bench/scheduler/
	$(GO) test -run '^$$' -bench 'Peers' -benchtime=1x -timeout 120m ./bench/scheduler/
	$(GO) test -run '^$$' -bench . -benchtime=1x -timeout 40m ./bench/hyperjob/
	$(GO) test -run '^$$' -bench . -benchtime=1x -timeout 20m ./bench/podgroupstatus/ | tee bench/results/podgroup-status.txt
	$(GO) test -run '^$$' -bench . -benchtime=1x -timeout 20m ./bench/podgroup/
	$(GO) test -run '^$$' -bench . -benchtime=1x -timeout 30m ./bench/discovery/
	$(GO) test -run '^$$' -bench . -benchtime=1x -timeout 40m ./bench/lifecycle/

.PHONY: e2e-kind
e2e-kind: ## End-to-end suite on kind (needs Docker and internet; not run in CI here).
	test/kind/run.sh

.PHONY: help
help:
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-16s %s\n", $$1, $$2}'
