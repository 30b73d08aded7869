# llama.cpp <-> llguidance bridge audit. `make report` and `make test` do all setup themselves.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# CUDA=1 builds llama-cpp-python with -DGGML_CUDA=on (see README, "Using a GPU")
CUDA ?= 0
LLAMA_CMAKE_ARGS := $(if $(filter 1,$(CUDA)),-DGGML_CUDA=on,)
# the venv is rebuilt only when the pins (or the CUDA switch) change
PIN_HASH := $(shell cat pyproject.toml | sha256sum | cut -c1-12)-cuda$(CUDA)
STAMP := $(VENV)/.installed-$(PIN_HASH)

VOCABS := $(shell sed -n 's/^[0-9a-f]*  ggml-vocab-\(.*\)\.gguf$$/\1/p' lib/llgbridge/vocabs.sha256)
LIB_SRC := $(wildcard lib/llgbridge/*.py)
NOTEBOOKS := census
RESULT_FILES := $(foreach n,$(NOTEBOOKS),$(foreach v,$(VOCABS),data/results/$(n)/$(v).json))

.PHONY: all setup data report test test-swapped lab clean distclean help
.DELETE_ON_ERROR:

all: report

help:
	@echo "make report   set up, fetch fixtures, run every notebook per vocab, write reports/"
	@echo "make test     set up, fetch fixtures, run the test suite"
	@echo "make setup    only the virtual environment (CUDA=1 for a GPU build of llama-cpp-python)"
	@echo "make data     only the vocab fixtures (data/vocabs/)"
	@echo "make test-swapped  run the bug-guarding tests against the other variant: each must fail"
	@echo "make lab      JupyterLab on notebooks/"
	@echo "make clean    remove generated results and executed notebooks (keeps .venv and data/vocabs)"

setup: $(STAMP)

$(STAMP): pyproject.toml
	@echo "== setting up $(VENV) (llama-cpp-python is compiled from source: a few minutes on 2 cores)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
	  $(BIN)/pip install --disable-pip-version-check -q --no-binary llama-cpp-python \
	  $(if $(filter 1,$(CUDA)),--no-cache-dir --force-reinstall,) -e .
	@rm -f $(VENV)/.installed-*
	@touch $@

data: data/vocabs/.complete

data/vocabs/.complete: lib/llgbridge/vocabs.sha256 | $(STAMP)
	$(BIN)/python -m llgbridge.fixtures data/vocabs
	@touch $@

data/vocabs/%.gguf: data/vocabs/.complete ;

data/results/%.json: $(LIB_SRC) data/vocabs/.complete | $(STAMP)
	$(BIN)/python -m llgbridge.run $(word 1,$(subst /, ,$*)) $(word 2,$(subst /, ,$*))

# each result also depends on its notebook and its fixture
define result_deps
data/results/$(1)/$(2).json: notebooks/$(1).ipynb data/vocabs/ggml-vocab-$(2).gguf
endef
$(foreach n,$(NOTEBOOKS),$(foreach v,$(VOCABS),$(eval $(call result_deps,$(n),$(v)))))

report: $(RESULT_FILES) | $(STAMP)
	$(BIN)/python -m llgbridge.report

test: data/vocabs/.complete | $(STAMP)
	$(BIN)/python -m pytest

test-swapped: data/vocabs/.complete | $(STAMP)
	$(BIN)/python tools/swapped.py

lab: data/vocabs/.complete | $(STAMP)
	$(BIN)/jupyter lab notebooks/

clean:
	rm -rf data/results reports/notebooks reports/html reports/run.json

distclean: clean
	rm -rf $(VENV) data
