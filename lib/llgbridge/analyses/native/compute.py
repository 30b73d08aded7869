"""The real C++ under review: built from the vendored tree, run on a vocab, and set against the port.

Everything else in this package drives llguidance through a Python port of
`common/llguidance.cpp`. This subpackage runs the code the PR changes, one module per job:

- `builder`: the vendored sources extracted and patched (the PR, and each candidate patch on top
  of it), compiled with `native/Makefile` once per llguidance version; `build_native()`, `unavailable()`;
- `logs`: what the compiled programs print, read back: `run_test()` runs one
  `test-grammar-llguidance` binary on one vocab (its exit status as a shell shows it, the counts
  the PR's two new tests print, guide 7.1, 7.2, the first failing string test), and
  `crash_cause()` says in one stable line why a program died;
- `causes`: `classify()` names why llama.cpp's test exited non-zero on a vocab, from what the test
  and the sampler did, by the first of its `RULES` that applies ("cause not classified", with the
  evidence, where none does);
- `trace`: `harness()` drives the compiled `llama_sampler_init_llg`, `port_trace()` the Python
  port (`port_traces()` every job once, shared by a sampler's runs on each llguidance), and
  `differential()` compares them cell by cell;
- `result`: `analyse()`, all of it for one vocab, the result the `native` notebook shows.

`python -m llgbridge.analyses.native build` is what `make native` runs.
"""

from __future__ import annotations

from .builder import (
    BIN,
    CANDIDATE_PATCHES,
    FIXED,
    LLG_PINNED,
    MAKEFILE,
    NATIVE,
    PATCH_OF,
    PATCHES,
    SAMPLERS,
    SHIPPED,
    STATUS,
    apply_patches,
    bin_dir,
    binaries,
    build_native,
    built_versions,
    candidate_tree,
    check_compiler,
    extract_sources,
    library_vars,
    llguidance_libraries,
    make_name,
    make_vars,
    patch_files,
    prepare_sources,
    run_make,
    unavailable,
    vendored_commit,
    venv_llguidance,
    version_key,
)
from .causes import RULES, classified, classify
from .crashes import crash_cause
from .logs import TestRun, parse_ranges, run_test
from .result import NativeResult, analyse, mask_error_rows, special_literal_rows
from .trace import (
    Difference,
    Differential,
    Job,
    Served,
    Trace,
    compare,
    differential,
    harness,
    harness_each,
    harness_samplers,
    harness_serve,
    harness_tests,
    jobs_for,
    port_trace,
    port_traces,
    special_job,
    special_literal,
    special_text,
)

__all__ = [
    "BIN",
    "CANDIDATE_PATCHES",
    "PATCH_OF",
    "FIXED",
    "LLG_PINNED",
    "MAKEFILE",
    "NATIVE",
    "PATCHES",
    "SAMPLERS",
    "SHIPPED",
    "STATUS",
    "apply_patches",
    "bin_dir",
    "binaries",
    "build_native",
    "built_versions",
    "candidate_tree",
    "check_compiler",
    "extract_sources",
    "llguidance_libraries",
    "library_vars",
    "make_name",
    "make_vars",
    "patch_files",
    "prepare_sources",
    "run_make",
    "unavailable",
    "vendored_commit",
    "venv_llguidance",
    "version_key",
    "RULES",
    "classified",
    "classify",
    "TestRun",
    "crash_cause",
    "parse_ranges",
    "run_test",
    "NativeResult",
    "analyse",
    "mask_error_rows",
    "special_literal_rows",
    "Difference",
    "Differential",
    "Job",
    "Trace",
    "compare",
    "differential",
    "harness",
    "Served",
    "harness_each",
    "harness_samplers",
    "harness_serve",
    "harness_tests",
    "jobs_for",
    "port_trace",
    "port_traces",
    "special_job",
    "special_literal",
    "special_text",
]
