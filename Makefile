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
CONTROLLER_GEN  := $(BIN)/controller-gen

TOOLS := $(CROSSPLANE) $(CROSSPLANE_CORE) $(PAT) $(CONTROLLER_GEN)

export PATH := $(BIN):$(PATH)

.PHONY: all tools generate check-generate build test unit render golden demo fuzz bench clean

all: build

## tools: build the pinned tools into .cache/bin (first run takes minutes).
tools: $(TOOLS)

$(CROSSPLANE): test/tools/cli/go.mod test/tools/cli/go.sum
	cd test/tools/cli && $(GO) build -o $@ github.com/crossplane/cli/v2/cmd/crossplane

$(CROSSPLANE_CORE): test/tools/core/go.mod test/tools/core/go.sum
	cd test/tools/core && $(GO) build -o $@ github.com/crossplane/crossplane/v2/cmd/crossplane

$(PAT): test/tools/patch-and-transform/go.mod test/tools/patch-and-transform/go.sum
	cd test/tools/patch-and-transform && $(GO) build -o $@ github.com/crossplane-contrib/function-patch-and-transform

$(CONTROLLER_GEN): test/tools/controller-gen/go.mod test/tools/controller-gen/go.sum
	cd test/tools/controller-gen && $(GO) build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen
