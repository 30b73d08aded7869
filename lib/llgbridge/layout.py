"""The module map: every module of the library, by layer, lowest first. The one map: the README's
Layout is generated from it (`python -m llgbridge.layout --readme` rewrites it; a test checks the
README holds it), and tests/test_layers.py checks every import against it: a module imports only
from its own layer or one listed before it, never in a cycle.

A name is a module below llgbridge, dotted (`report.table`); `X/` is the package X and every module
in it; a `*` stands for one name (`analyses.*.compute`: each analysis's compute). Standard library
only.
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

from .paths import ROOT

# (layer, ((module, what it is), ...)), lowest first
LAYERS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (
        "base",
        (
            ("paths", "where things live, input names"),
            ("errors", ""),
            ("loaded", "the input files a process loaded, as their bytes were"),
            ("catalogue", "the real models by name, their overrides"),
            ("candidates", "the registry of candidate patches"),
            ("analyses", "the registry of analyses, found as packages"),
            ("analyses.registry", "what an entry declares"),
            ("analyses.*", "each analysis's entry"),
            ("grammars", ""),
            ("guide", "the guide's own figures"),
            ("upstream", "what the review says of llama.cpp upstream, as recorded evidence (upstream.json)"),
            ("palette", "colours only"),
            ("jobserver", "Make's job slots"),
            ("pool", "the one crash-isolating process pool"),
            ("layout", "this map"),
        ),
    ),
    (
        "core",
        (
            ("llg", "ctypes binding to llguidance, Matcher"),
            ("gguf_meta", ""),
            ("modelfile", "a model file, its header read once where it enters, passed as one value"),
            ("overrides", "llama.cpp's key overrides: parsed, checked against its log"),
            ("inputs", "an input, parsed and checked once where it enters"),
            ("params", ""),
            ("vocab", "with _llamacall.c, llama.h's two per-token vocab calls bound for CPython"),
            ("cbuild", "builds it"),
            ("bridges", "every bridge: upstream, fixed, sentinel, the candidates, truth; kept per loaded vocab"),
            ("cases", "what the matrix and the server ask, and each answer's own check"),
            ("generation", "a model, a bridge's matcher and a prompt to tokens, as llama.cpp samples"),
            ("judge", "tokens to an outcome, by their real bytes"),
            ("probe", "the PR's three probes"),
            ("results", "the result contract: provenance, the one judge of current"),
            ("show", ""),
        ),
    ),
    (
        "inputs",
        (
            ("fetch", "the one fetcher: pip download, sha256 against a manifest, atomic rename"),
            ("fixtures", "the vocab fixtures, vocabs.sha256"),
            ("models", "the real models, models.sha256"),
            ("synth", "synthetic models"),
            ("inputsets", "the input sets make report runs each analysis on, by name"),
        ),
    ),
    (
        "compute",
        (
            ("analyses.*.compute", "each analysis's computation"),
            ("analyses.engines.adapters/", "each library's own llama.cpp integration, called"),
            ("analyses.engines.findings", "each engine's findings: reproducer and upstream thread"),
            ("analyses.engines_e2e.guidance_run", "guidance end to end, in a process with its own pins"),
            ("soundness", "the walk every bridge's mask is checked along"),
            ("generate", "one generation, judged: the matrix's row"),
            ("analyses.corpus.job", "the corpus's jobs and their cache key"),
            ("analyses.corpus.cluster", "its engines: serial, the pool, Dask"),
            ("analyses.corpus.schemas", "the SchemaStore corpus, schemas.tsv"),
            ("analyses.native.crashes", "why a native program died, in one line"),
            ("analyses.native.builder", "the compiled C++: sources extracted, patched and built"),
            ("analyses.native.logs", "what the compiled programs print, read back"),
            ("analyses.native.causes", "why llama.cpp's test exited non-zero"),
            ("analyses.native.trace", "the compiled sampler and the port, step by step"),
            ("analyses.native.result", "all of it for one vocab"),
            ("analyses.server.llama_server", "llama-server built and run"),
            ("analyses.server.causes", "a server error's cause, from its message and log"),
            ("analyses.server.cases", "the requests the server analysis sends"),
            ("analyses.server.judge", "an answer judged by its bytes, the server's own content beside"),
            ("gguf_fuzz", "mutated GGUF files through loading"),
            ("nb", "what the notebooks call"),
        ),
    ),
    (
        "render",
        (
            ("report.data", "every result loaded once"),
            ("report.coverage", "what a render lacks, said first: a partial report"),
            ("report.gfm", ""),
            ("report.glossary", ""),
            ("report.table", "Table, Cell, Section: HTML and Markdown from one description"),
            ("report.plots", ""),
            ("report.templating", "the one Jinja environment"),
            ("report.prose", "a section's prose from its .md.j2 fragment"),
        ),
    ),
    (
        "sections",
        (("analyses.*.section", "each analysis's section of the page, with its NAME.md.j2"),),
    ),
    (
        "pipeline",
        (
            ("run", "the one notebook runner"),
            ("remote", "make report's jobs on a Dask scheduler"),
            ("batch", "make report's planner, on the pool or a Dask scheduler"),
        ),
    ),
    (
        "report",
        (
            ("report.verdict", ""),
            ("report.story", ""),
            ("report.repro", ""),
            ("report.tested", ""),
            ("report.beyond", ""),
            ("report.review", ""),
            ("report.claims", "each sentence of the comment with a figure, and the rows it rests on"),
            ("report.comment", ""),
            ("report.pages", "the pages, the Markdown and the tables written"),
            ("report", "python -m llgbridge.report"),
            ("answer", "a what-if's answer for its file, from its tables"),
        ),
    ),
    (
        "top",
        (
            ("whatif", "every analysis on one file, its own page"),
            ("audit", "make audit: every file's what-if, one summary"),
            ("measure/", "make bench, the load test, make quotes"),
        ),
    ),
)


def _matches(pattern: str, module: str) -> bool:
    if pattern.endswith("/"):
        return module == pattern[:-1] or module.startswith(pattern[:-1] + ".")
    p, m = pattern.split("."), module.split(".")
    return len(p) == len(m) and all(a in ("*", b) for a, b in zip(p, m))


def layer(module: str) -> int | None:
    """`module`'s layer (its index in LAYERS); the most specific name wins: an exact one over a `*`."""
    found = [
        (pattern.count("*"), -len(pattern), i)
        for i, (_, entries) in enumerate(LAYERS)
        for pattern, _ in entries
        if _matches(pattern, module)
    ]
    return min(found)[2] if found else None


def patterns() -> list[str]:
    return [pattern for _, entries in LAYERS for pattern, _ in entries]


BEGIN, END = "<!-- layout: generated by python -m llgbridge.layout --readme -->", "<!-- /layout -->"
WIDTH = 104
INDENT = 17


def text() -> str:
    """The map as the README shows it."""
    lines = []
    for name, entries in LAYERS:
        said = ", ".join(f"{p} ({note})" if note else p for p, note in entries)
        wrapped = textwrap.wrap(said, WIDTH - INDENT, break_on_hyphens=False)
        lines.append(f"  {name:<{INDENT - 2}}{wrapped[0]}")
        lines += [" " * INDENT + w for w in wrapped[1:]]
    return "\n".join(lines)


HEAD = "lib/llgbridge/   the library, by layer, lowest first: lib/llgbridge/layout.py, tests/test_layers.py checks it"


def readme_block() -> str:
    """The README's Layout block: the library's map, between the markers."""
    return f"{BEGIN}\n```\n{HEAD}\n{text()}\n```\n{END}"


LIST_BEGIN, LIST_END = "<!-- analyses: generated by python -m llgbridge.layout --readme -->", "<!-- /analyses -->"


def analyses_block() -> str:
    """The README's list of the analyses, from the registry: each entry's name, the first line of
    its package's docstring, and where it runs."""
    import importlib

    # the registry imports every analysis's entry: only the README's rewrite needs it, not the map
    from .analyses import ANALYSES, INPUT_SETS

    lines = [LIST_BEGIN]
    for a in sorted(ANALYSES, key=lambda a: a.page):
        doc = (importlib.import_module(a.package).__doc__ or "").strip().split("\n\n")[0]
        where = INPUT_SETS[a.runs_on] + ("; and in a what-if" if a.whatif else "")
        lines.append(f"- `{a.name}`: " + " ".join(doc.split()) + f" On {where}.")
    return "\n".join([*lines, LIST_END])


def _replace(text: str, begin: str, end: str, block: str) -> str:
    return re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: block, text, flags=re.S)


# the files that hold the map (and the README, the list of analyses): each rewritten from the code
MAPPED = ("README.md", "docs/pipeline.md")


def rewrite(readme: Path) -> bool:
    """`readme`'s Layout block and its list of analyses (where it has them) replaced by the code's;
    True if either changed."""
    old = readme.read_text(encoding="utf-8")
    new = _replace(_replace(old, BEGIN, END, readme_block()), LIST_BEGIN, LIST_END, analyses_block())
    if new != old:
        readme.write_text(new, encoding="utf-8")
    return new != old


if __name__ == "__main__":
    if sys.argv[1:] == ["--readme"]:
        for name in MAPPED:
            print(name, "rewritten" if rewrite(ROOT / name) else "unchanged")
    else:
        print(text())
