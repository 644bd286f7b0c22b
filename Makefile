# Kausality for Crossplane. `make demo` runs the main job, `make test` runs
# every test. Tools are built from the pinned modules under test/tools into
# .cache/bin once and reused.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c

ROOT      := $(abspath .)
CACHE     := $(ROOT)/.cache
BIN       := $(CACHE)/bin
GO        ?= go

CROSSPLANE      := $(BIN)/crossplane
CROSSPLANE_CORE := $(BIN)/crossplane-core
PAT             := $(BIN)/function-patch-and-transform
PAT_MODULE      := github.com/crossplane-contrib/function-patch-and-transform
# Functions the real-world corpus (examples/corpus) composes with, built
# from their published modules by test/tools/published/published.sh.
AUTO_READY        := $(BIN)/function-auto-ready
AUTO_READY_MODULE := github.com/crossplane-contrib/function-auto-ready@v0.6.0
CEL_FILTER        := $(BIN)/function-cel-filter
CEL_FILTER_MODULE := github.com/crossplane-contrib/function-cel-filter@v0.2.0
PUBLISHED         := test/tools/published/published.sh
# Functions for templated and sequenced pipelines, at fixed commits. The
# module proxy may refuse them; test/tools/published/thirdparty.sh then
# builds them from the sources of the same commits in a third_party folder
# beside the repository (KAUSALITY_THIRD_PARTY names another).
GO_TEMPLATING        := $(BIN)/function-go-templating
GO_TEMPLATING_MODULE := github.com/crossplane-contrib/function-go-templating 9222efc18ca5ed8f47782025fc3024551ded13b9 function-go-templating
SEQUENCER            := $(BIN)/function-sequencer
SEQUENCER_MODULE     := github.com/crossplane-contrib/function-sequencer c28333872db7a7df850837573fedfce4fd020f12 function-sequencer
THIRDPARTY           := test/tools/published/thirdparty.sh
CONTROLLER_GEN  := $(BIN)/controller-gen
KUBE_APISERVER  := $(BIN)/kube-apiserver
KUBE_CONTROLLER := $(BIN)/kube-controller-manager
ETCD            := $(BIN)/etcd
IMAGE           := $(BIN)/image
GOLANGCI_LINT   := $(BIN)/golangci-lint
ACTIONLINT      := $(BIN)/actionlint
BENCHSTAT       := $(BIN)/benchstat

TOOLS := $(CROSSPLANE) $(CROSSPLANE_CORE) $(PAT) $(AUTO_READY) $(CEL_FILTER) $(GO_TEMPLATING) $(SEQUENCER) $(CONTROLLER_GEN) $(KUBE_APISERVER) $(KUBE_CONTROLLER) $(ETCD) $(IMAGE) $(GOLANGCI_LINT) $(ACTIONLINT)

# envtest finds kube-apiserver and etcd here.
export KUBEBUILDER_ASSETS := $(BIN)

export PATH := $(BIN):$(PATH)

.PHONY: all tools generate check-generate build release release-check publish skew test lint unit removal render golden demo examples e2e fleet soak-bob fuzz bench bench-scale clean xpkg

all: build

## tools: build the pinned tools into .cache/bin (first run takes minutes).
tools: $(TOOLS)

$(CROSSPLANE): test/tools/cli/go.mod test/tools/cli/go.sum
	cd test/tools/cli && $(GO) build -o $@ github.com/crossplane/cli/v2/cmd/crossplane

# The RBAC manager (crossplane-core rbac start) serves metrics on
# controller-runtime's default :8080 and has no flag to move them; built with
# that default set to 0 it serves none, so the suite runs beside anything on
# 8080. crossplane-core core start takes METRICS_PORT as before.
# It is built with its release's version, which the package manager checks
# the packages' spec.crossplane.version against.
CORE_VERSION = $(shell sed -n 's/^[[:space:]]*github.com\/crossplane\/crossplane\/v2 \(v[^ ]*\).*/\1/p' test/tools/core/go.mod)
$(CROSSPLANE_CORE): test/tools/core/go.mod test/tools/core/go.sum
	cd test/tools/core && $(GO) build -ldflags='-X sigs.k8s.io/controller-runtime/pkg/metrics/server.DefaultBindAddress=0 -X github.com/crossplane/crossplane-runtime/v2/pkg/version.version=$(CORE_VERSION)' -o $@ github.com/crossplane/crossplane/v2/cmd/crossplane

$(PAT): test/tools/patch-and-transform/go.mod test/tools/patch-and-transform/go.sum
	cd test/tools/patch-and-transform && $(GO) build -o $@ $(PAT_MODULE)

$(AUTO_READY): $(PUBLISHED)
	$(PUBLISHED) build $(AUTO_READY_MODULE) $@

$(CEL_FILTER): $(PUBLISHED)
	$(PUBLISHED) build $(CEL_FILTER_MODULE) $@

$(GO_TEMPLATING): $(THIRDPARTY)
	$(THIRDPARTY) build $(GO_TEMPLATING_MODULE) $@

$(SEQUENCER): $(THIRDPARTY)
	$(THIRDPARTY) build $(SEQUENCER_MODULE) $@

$(CONTROLLER_GEN): test/tools/controller-gen/go.mod test/tools/controller-gen/go.sum
	cd test/tools/controller-gen && $(GO) build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

$(KUBE_APISERVER): test/tools/kube-apiserver/go.mod test/tools/kube-apiserver/go.sum
	cd test/tools/kube-apiserver && $(GO) build -o $@ k8s.io/kubernetes/cmd/kube-apiserver

# The scenario suite runs its ClusterRole aggregation and garbage collector,
# which Crossplane's RBAC and deletion rely on.
$(KUBE_CONTROLLER): test/tools/kube-apiserver/go.mod test/tools/kube-apiserver/go.sum
	cd test/tools/kube-apiserver && $(GO) build -o $@ k8s.io/kubernetes/cmd/kube-controller-manager

$(ETCD): test/tools/etcd/go.mod test/tools/etcd/go.sum test/tools/etcd/main.go
	cd test/tools/etcd && $(GO) build -o $@ .

$(IMAGE): package/image/go.mod package/image/go.sum package/image/main.go
	cd package/image && $(GO) build -o $@ .

$(GOLANGCI_LINT): test/tools/golangci-lint/go.mod test/tools/golangci-lint/go.sum
	cd test/tools/golangci-lint && $(GO) build -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

$(ACTIONLINT): test/tools/actionlint/go.mod test/tools/actionlint/go.sum
	cd test/tools/actionlint && $(GO) build -o $@ github.com/rhysd/actionlint/cmd/actionlint

# Only make bench needs it.
$(BENCHSTAT): test/tools/benchstat/go.mod test/tools/benchstat/go.sum
	cd test/tools/benchstat && $(GO) build -o $@ golang.org/x/perf/cmd/benchstat

## generate: regenerate deepcopy code and CRDs with controller-gen.
generate: $(CONTROLLER_GEN)
	$(GO) generate ./apis/... ./input/... ./test/recorder/apis/...

## check-generate: fail when committed generated files are stale.
check-generate: generate
	@if [ -n "$$(git status --porcelain -- apis input package test/recorder)" ]; then \
	  echo "Generated files are stale; run 'make generate' and commit:"; \
	  git status --porcelain -- apis input package test/recorder; exit 1; fi

## build: build the function, the provider and the kubectl plugin (kubectl-kausality) into bin/.
build:
	$(GO) build -o bin/function-kausality ./fn
	$(GO) build -o bin/provider-kausality ./provider
	$(GO) build -o bin/kubectl-kausality ./cmd/kubectl-kausality

## unit: gofmt, vet and run every Go test (render tests need the tools, the scenario suite the packages).
unit: tools xpkg
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 50m ./...

## lint: golangci-lint with .golangci.yml (linters and gofmt/goimports), and actionlint on the GitHub workflows.
lint: $(GOLANGCI_LINT) $(ACTIONLINT)
	$(GOLANGCI_LINT) run ./...
	$(ACTIONLINT) -color=false

## removal: take Kausality out of a control plane of its own (test/removal; it deletes the provider package, so it runs after the scenario suite, never beside it).
removal: tools xpkg
	$(GO) vet -tags removal ./test/removal/
	$(GO) test -count=1 -timeout 15m -tags removal ./test/removal/

## skew: the previous release (RELEASES.md, built from the repository's history) beside this build, in both orders, each on a control plane of its own (test/skew, build tag skew).
skew: tools xpkg
	$(GO) vet -tags skew ./test/skew/
	$(GO) test -count=1 -timeout 20m -tags skew ./test/skew/ -v

## test: everything that needs no network: generated files, lint, vet, packages, unit, fuzz seeds, render goldens, envtest, the scenario suite, then the removal, the version skew and the fleet roll-out, each alone, and a release built and published to a registry of its own.
test: check-generate xpkg lint unit removal skew fleet release-check

OUT     := $(ROOT)/_output
VERSION ?= dev
# Packages run on Linux nodes whatever builds them. make xpkg builds them
# for the host's architecture (the suites run them here); make release for
# every architecture in PACKAGE_ARCHS, one package file each, which
# make publish pushes as one multi-platform package.
ARCH          ?= $(shell $(GO) env GOARCH)
PACKAGE_ARCHS ?= amd64 arm64

# kausality-packages builds function-kausality and provider-kausality for
# linux/$(1): the binaries and runtime images into $(2), the packages as
# $(2)/function-kausality$(3).xpkg and $(2)/provider-kausality$(3).xpkg.
# --examples-root defaults to ./examples, the repository's render cases,
# which are not package examples: it points where nothing is.
define kausality-packages
	@mkdir -p $(2)/linux_$(1) && rm -rf $(OUT)/no-examples
	CGO_ENABLED=0 GOOS=linux GOARCH=$(1) $(GO) build -trimpath -ldflags='-s -w' -o $(2)/linux_$(1)/function-kausality ./fn
	CGO_ENABLED=0 GOOS=linux GOARCH=$(1) $(GO) build -trimpath -ldflags='-s -w' -o $(2)/linux_$(1)/provider-kausality ./provider
	$(IMAGE) --arch $(1) --binary $(2)/linux_$(1)/function-kausality --out $(2)/linux_$(1)/function-kausality-image.tar --tag kausality.io/function-kausality:$(VERSION) --port 9443
	$(IMAGE) --arch $(1) --binary $(2)/linux_$(1)/provider-kausality --out $(2)/linux_$(1)/provider-kausality-image.tar --tag kausality.io/provider-kausality:$(VERSION) --port 9443 --port 8080 --port 8081
	$(CROSSPLANE) xpkg build --package-root package/function --examples-root $(OUT)/no-examples --embed-runtime-image-tarball $(2)/linux_$(1)/function-kausality-image.tar --package-file $(2)/function-kausality$(3).xpkg
	$(CROSSPLANE) xpkg build --package-root package/provider --examples-root $(OUT)/no-examples --embed-runtime-image-tarball $(2)/linux_$(1)/provider-kausality-image.tar --package-file $(2)/provider-kausality$(3).xpkg
endef

## xpkg: build function-kausality and provider-kausality .xpkg files (linux, the host's architecture) into _output, offline (images without Docker), and the packages the scenario suite installs beside them.
xpkg: $(CROSSPLANE) $(IMAGE)
	$(call kausality-packages,$(ARCH),$(OUT),)
	@# The scenario suite installs these too; its package runtime is External,
	@# so they carry no runtime image.
	$(CROSSPLANE) xpkg build --package-root test/recorder/package --examples-root $(OUT)/no-examples --package-file $(OUT)/provider-recorder.xpkg
	@# The package root is the pinned module's own package/ folder: download
	@# the module first, since go list prints no Dir for a module not in the
	@# module cache (a fresh machine's cache is empty).
	pat_dir="$$(cd test/tools/patch-and-transform && $(GO) mod download -json $(PAT_MODULE) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$$/\1/p')"; \
	  if [ -z "$$pat_dir" ] || [ ! -d "$$pat_dir/package" ]; then echo "cannot find the package folder of $(PAT_MODULE) (got '$$pat_dir')"; exit 1; fi; \
	  $(CROSSPLANE) xpkg build --package-root "$$pat_dir/package" --examples-root $(OUT)/no-examples --package-file $(OUT)/function-patch-and-transform.xpkg
	$(CROSSPLANE) xpkg build --package-root "$$($(PUBLISHED) dir $(AUTO_READY_MODULE))/package" --examples-root $(OUT)/no-examples --package-file $(OUT)/function-auto-ready.xpkg
	$(CROSSPLANE) xpkg build --package-root "$$($(PUBLISHED) dir $(CEL_FILTER_MODULE))/package" --examples-root $(OUT)/no-examples --package-file $(OUT)/function-cel-filter.xpkg
	$(CROSSPLANE) xpkg build --package-root "$$($(THIRDPARTY) dir $(GO_TEMPLATING_MODULE))/package" --examples-root $(OUT)/no-examples --package-file $(OUT)/function-go-templating.xpkg
	$(CROSSPLANE) xpkg build --package-root "$$($(THIRDPARTY) dir $(SEQUENCER_MODULE))/package" --examples-root $(OUT)/no-examples --package-file $(OUT)/function-sequencer.xpkg

# The kubectl plugin is released for these platforms, next to the packages.
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64
# Where make publish pushes the packages, and where the krew manifest says
# the plugin's archives are: the release workflow's registry and release.
REGISTRY ?= ghcr.io/kausality-io
RELEASE_DIR ?= $(OUT)/release
RELEASE_URL ?= https://github.com/kausality-io/kausality-crossplane/releases/download/$(VERSION)

## release: the release artifacts for VERSION in RELEASE_DIR (_output/release): function-kausality and provider-kausality for linux/<arch> of each of PACKAGE_ARCHS, kubectl-kausality for RELEASE_PLATFORMS as .tar.gz, its krew manifest (kausality.yaml) and checksums.txt; whatever the host.
release: $(CROSSPLANE) $(IMAGE)
	@[[ "$(VERSION)" =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$$ ]] || { echo "make release needs VERSION=vMAJOR.MINOR.PATCH, got '$(VERSION)'"; exit 1; }
	@rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)
	$(MAKE) --no-print-directory $(addprefix release-packages-,$(PACKAGE_ARCHS))
	@rm -rf $(RELEASE_DIR)/linux_*
	@for p in $(RELEASE_PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; ext=; [ "$$os" = windows ] && ext=.exe; \
	  dir=$(RELEASE_DIR)/kubectl-kausality_$${os}_$${arch}; mkdir -p $$dir; \
	  echo "kubectl-kausality $$os/$$arch"; \
	  GOOS=$$os GOARCH=$$arch CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w -X main.version=$(VERSION)' -o $$dir/kubectl-kausality$$ext ./cmd/kubectl-kausality; \
	  cp README.md $$dir/; \
	done
	$(GO) run ./package/release --version $(VERSION) --url $(RELEASE_URL) --dir $(RELEASE_DIR)
	cat $(RELEASE_DIR)/checksums.txt

# release-packages-<arch>: make release's packages for linux/<arch>.
release-packages-%: $(CROSSPLANE) $(IMAGE)
	$(call kausality-packages,$*,$(RELEASE_DIR),-$*)

## publish: push the packages make release built to REGISTRY as function-kausality:VERSION and provider-kausality:VERSION, one multi-platform package each (the release workflow runs it on a tag).
publish: $(CROSSPLANE)
	$(CROSSPLANE) xpkg push -f $(subst $(space),$(comma),$(foreach a,$(PACKAGE_ARCHS),$(RELEASE_DIR)/function-kausality-$(a).xpkg)) $(REGISTRY)/function-kausality:$(VERSION)
	$(CROSSPLANE) xpkg push -f $(subst $(space),$(comma),$(foreach a,$(PACKAGE_ARCHS),$(RELEASE_DIR)/provider-kausality-$(a).xpkg)) $(REGISTRY)/provider-kausality:$(VERSION)

## release-check: make release as v0.0.0-check into _output/release-check, then check it (test/xpkg, build tag release): each package a Linux image of its architecture, make publish pushing them as one multi-platform package to a registry of the test's own, the plugin's archives, krew manifest and checksums.
release-check:
	$(MAKE) --no-print-directory release VERSION=v0.0.0-check RELEASE_DIR=$(OUT)/release-check
	VERSION=v0.0.0-check RELEASE_DIR=$(OUT)/release-check $(GO) test -count=1 -tags release ./test/xpkg/

comma := ,
space := $(subst ,, )

## render: render every example with the real crossplane render and print the output.
render: tools
	$(GO) run ./test/demo --raw

## golden: re-record the render golden files after an intended change.
golden: tools
	$(GO) test -count=1 ./test/render/ -run TestRollOutSteps -update
	$(GO) test -count=1 ./test/render/ -update

## demo: the main job: on real Crossplane on an embedded control plane, walk S1, S2, S4, a batched roll-out and an upgrade rolled out across XRs, and print traces and gate timelines.
demo: tools xpkg
	$(GO) run ./test/demo

## examples: render every example and print gate, allowances and trace per composed resource.
examples: tools
	$(GO) run ./test/demo --examples

## e2e: the accident scenarios S1-S8 on real Crossplane core (also part of make test).
e2e: tools xpkg
	$(GO) test -count=1 -timeout 50m ./test/e2e/

## fleet: the roll-out of an upgrade across 200 XStores on real core (test/e2e TestV2FleetRollOut, build tag fleet), alone on a control plane of its own after everything else in make test: about 8 minutes on two cores.
fleet: tools xpkg
	$(GO) test -count=1 -timeout 40m -tags fleet ./test/e2e/ -run '^TestV2FleetRollOut$$' -v

## breaker-defaults: the circuit-breaker measurements of the scenario suite (TestV2CircuitBreakerBudget, TestV2CircuitBreakerBudgetAtScale) on a control plane of their own whose core runs with Crossplane's default flags (the suite's runs with --circuit-breaker-burst=1000); docs/OPERATIONS.md reports what they show. Not part of make test: about 4 minutes.
breaker-defaults: tools xpkg
	KAUSALITY_CROSSPLANE_DEFAULTS=1 $(GO) test -count=1 -timeout 20m ./test/e2e/ -run '^TestV2CircuitBreakerBudget(AtScale)?$$' -v

BOB_ROUNDS ?= 300
## soak-bob: the randomized Bob of the scenario suite, in both shapes, for BOB_ROUNDS rounds (make test plays 30), with a new seed each run (BOB_SEED replays one).
soak-bob: tools xpkg
	$(GO) test -count=1 -timeout 60m ./test/e2e/ -run '^TestRandomizedBob(Legacy)?$$' -v -bob.rounds $(BOB_ROUNDS) $(if $(BOB_SEED),-bob.seed $(BOB_SEED))

FUZZTIME ?= 20s
## fuzz: run every fuzz target for FUZZTIME each.
fuzz:
	@for pkg in $$($(GO) list ./internal/... ./provider/...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test $$pkg -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) || exit 1; \
	  done; done

## bench: run the benchmarks BENCHCOUNT times into _output/bench.txt and print with benchstat the medians and each one's ratio to its reference (impl=noop for the function, impl=reference for admission): the function against a no-op function over gRPC and in process and against function-patch-and-transform on its own request, the core, the admission handler, and the gate controller at 1000 MRs (one run; GATEBENCH_FLAGS='-gatebench.rate=20 -gatebench.heapprofile=heap.pb.gz').
BENCHCOUNT ?= 6
GATEBENCH_FLAGS ?=
bench: tools $(BENCHSTAT)
	@mkdir -p $(OUT)
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) ./internal/... ./test/envtest/ | tee $(OUT)/bench.txt
	$(GO) test -run '^$$' -bench 'GateClose1000' -benchtime 1x ./test/gatebench/ $(GATEBENCH_FLAGS) | tee -a $(OUT)/bench.txt
	@echo; echo "== the function against a no-op function, admission against its reference: medians, and ratios to the first column"
	$(BENCHSTAT) -filter '.name:(RunFunction_grpc OR RunFunction)' -col '/impl@(noop kausality transport)' $(OUT)/bench.txt
	$(BENCHSTAT) -filter '.name:RunFunction_patchAndTransform' -col '/impl@(patch-and-transform kausality)' $(OUT)/bench.txt
	$(BENCHSTAT) -filter '.name:(Propagation)' -col '/impl@(plain propagated)' $(OUT)/bench.txt
	$(BENCHSTAT) -filter '.name:ClaimUpdate' -col '/impl@(reference handler)' $(OUT)/bench.txt

## bench-scale: how Kausality grows with the fleet, into _output/bench-scale.txt: the function's time and request size for one XR of ten resources while an upgrade rolls out across a fleet of 50, 500 and 5,000 XRs, the provider's work per roll-out step (whose turn it is) and the roll-out controller's whole pass with the heap its cached fleet holds per composite, for the same fleets (BENCHCOUNT runs, benchstat's ratios); on a real API server, what one pass of the roll-out controller reads and writes there and its CPU per composite, for the same fleets; then one run each of the gate controller and the managed webhook from 50 composites with 500 gated MRs to 500 with 5,000: the webhook's mean latency and Crossplane's write p99 while 16 writers stamp every MR at once, the gate controller's CPU per close, close latency and resident memory against a bare manager (GATEBENCH_FLAGS as for bench).
bench-scale: tools $(BENCHSTAT)
	@mkdir -p $(OUT)
	$(GO) test -run '^$$' -bench 'RunFunctionFleet' -benchmem -count $(BENCHCOUNT) ./internal/compose/ | tee $(OUT)/bench-scale.txt
	$(GO) test -run '^$$' -bench 'Decide' -benchmem -count $(BENCHCOUNT) ./internal/rollout/ | tee -a $(OUT)/bench-scale.txt
	$(GO) test -run '^$$' -bench 'Work' -benchmem -count $(BENCHCOUNT) ./provider/rollouts/ | tee -a $(OUT)/bench-scale.txt
	$(GO) test -run '^$$' -bench 'GateCloseScale|RolloutPassScale' -benchtime 1x -timeout 60m ./test/gatebench/ $(GATEBENCH_FLAGS) | tee -a $(OUT)/bench-scale.txt
	@echo; echo "== the function's time and request for one XR of ten resources in a fleet of 50, 500 and 5,000 rolling out an upgrade"
	$(BENCHSTAT) -filter '.name:RunFunctionFleet' -col '/fleet' $(OUT)/bench-scale.txt
	@echo; echo "== the provider's work per roll-out step, per composite, in a fleet of 50, 500 and 5,000"
	$(BENCHSTAT) -filter '.name:Decide' -col '/fleet' $(OUT)/bench-scale.txt
	@echo; echo "== the roll-out controller's pass over a fleet of 50, 500 and 5,000, and the heap its cached fleet holds per composite"
	$(BENCHSTAT) -filter '.name:Work' -col '/fleet' $(OUT)/bench-scale.txt
	@echo; echo "== one pass of the roll-out controller on a real API server while an upgrade waits on a fleet of 50, 500 and 5,000: the API server's reads and writes a pass, the provider's CPU a composite a pass"
	$(BENCHSTAT) -filter '.name:RolloutPassScale' -col '/fleet' $(OUT)/bench-scale.txt

clean:
	rm -rf bin .cache _output
