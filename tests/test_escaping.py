"""Text from inputs never becomes markup on a page (issue 48, break 7).

Hostile strings are written by the test itself into each input the report quotes: token texts
crafted into a copy of llama-spm (written with `gguf`), a file name with backticks and HTML, the
leak grammar and the forced literal as a `-p` parameter would give them. Results are computed
from those inputs through the real bridges, the report is rendered, and the executed-notebook
page is published the way `run` publishes it. A control report is built the same way from
harmless inputs: every tag, attribute and absolute URL a page holds must be one the control's
pages hold too (the report's own), in every HTML file and in the Markdown files as GitHub renders
them (cmark-gfm, raw HTML let through as GitHub's sanitizer would see it).
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options
from gguf import Keys
from helpers import write_notebook, write_vocab

from llgbridge import nb, probe, report, run
from llgbridge.analyses.census import compute as census
from llgbridge.analyses.forced import compute as forced_mod
from llgbridge.analyses.leak import compute as leak_mod
from llgbridge.bridges import make_bridge
from llgbridge.grammars import LEAK_GRAMMAR
from llgbridge.paths import write_json
from llgbridge.vocab import Vocab

IMG = "<img src=x onerror=alert(1)>"
PIC = "![x](https://example.invalid/x.png)"
LINK = "[link](https://example.invalid)"
# an input's name is refused unless plain (`nb.result_path`); its file's name is not: it cannot hold
# "/", so no URL, but the backticks, the HTML, a pipe and a command substitution
HOSTILE_FILE = f"v`{IMG}`|$(id).gguf"
HOSTILE_TOKENS = [f"▁a`{IMG}`", f"▁b`{PIC}`", f"▁c`{LINK}`|$(id)"]
HOSTILE_LITERAL = f"say {LINK} {PIC} `x` {IMG} | $(id)"
HOSTILE_GRAMMAR = LEAK_GRAMMAR + f" // `{PIC}` {LINK}"
FIRST = 259  # llama-spm's first tokens after its byte tokens: the lowest ids the census quotes


def _crafted(key: str, value: object, texts: list[str]) -> object:
    if key != Keys.Tokenizer.LIST:
        return value
    tokens = list(value)  # type: ignore[call-overload]
    for i, text in enumerate(texts):
        tokens[FIRST + i] = text.encode()
    return tokens


def _results(root: Path, file: str, texts: list[str], literal: str, grammar: str) -> Path:
    """A results tree for one input, computed through the real bridges as the notebooks do, and a
    failed one whose error names the file, as `run` writes it."""
    name = "crafted"
    path = write_vocab(root / file, lambda k, v: _crafted(k, v, texts))
    v = Vocab(path, name)
    out = root / "results"
    nb.write_result(str(out), "census", name, census.run_census(v).to_json())
    truth = make_bridge(v, "truth")
    built = {b: make_bridge(v, b) for b in ("upstream", "fixed")}
    leaks = [leak_mod.leak_test(built[b], truth, grammar) for b in built]
    nb.write_result(str(out), "leak", name, leak_mod.leak_payload(v, grammar, leaks, {}))
    forced = [forced_mod.forced_test(built[b], literal) for b in built]
    nb.write_result(str(out), "forced", name, forced_mod.forced_payload(literal, forced, {}, name))
    cases = probe.tokenize_cases(v, list(probe.PROBES))
    nb.write_result(str(out), "probe", name, probe.payload(literal, probe.probe_row(v), cases))
    error = f"InputError: data/vocabs/{file}: truncated GGUF (100000 of 723676 bytes)"
    write_json(
        out / "probe" / "broken.json", {"status": "failed", "notebook": "probe", "vocab": "broken", "error": error}
    )
    return out


def _report(root: Path, file: str, texts: list[str], literal: str, grammar: str) -> Path:
    results = _results(root, file, texts, literal, grammar)
    out = root / "report"
    # the executed notebook's page, published as `run` publishes it, with the run's parameters
    import nbformat

    write_notebook(root, "forced", "print('done')")
    src = root / "forced.ipynb"
    it = {"name": "crafted", "file": f"data/vocabs/{file}", "models": [], "overrides": []}
    params = {"input": it, "literal": literal, "results_dir": "results"}
    run._publish(nbformat.read(src, as_version=4), src, "forced", "crafted", params, out, [])
    report.write_report(results, out)
    return out


class _Markup(HTMLParser):
    """Every tag, (tag, attribute) and absolute URL of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attrs: set[tuple[str, str]] = set()
        self.urls: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        for k, val in attrs:
            self.attrs.add((tag, k))
            if k in ("href", "src", "action", "srcset", "poster", "data") and val and ":" in val.split("/")[0]:
                self.urls.add(val)


def _markup(out: Path) -> dict[str, _Markup]:
    """Each written page's markup: HTML as it is, Markdown as GitHub renders it."""
    pages = {}
    for p in sorted(out.rglob("*")):
        if p.suffix not in (".html", ".md"):
            continue
        text = p.read_text(encoding="utf-8")
        if p.suffix == ".md":
            text = cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)
        m = _Markup()
        m.feed(text)
        pages[str(p.relative_to(out))] = m
    return pages


@pytest.fixture(scope="module")
def control(tmp_path_factory: pytest.TempPathFactory) -> _Markup:
    """Everything the report's own pages hold, from harmless inputs."""
    out = _report(
        tmp_path_factory.mktemp("control"), "plain.gguf", ["▁aaa", "▁bbb", "▁ccc"], "hello world", LEAK_GRAMMAR
    )
    own = _Markup()
    for m in _markup(out).values():
        own.tags |= m.tags
        own.attrs |= m.attrs
        own.urls |= m.urls
    return own


def test_no_input_text_becomes_markup_on_any_page(control: _Markup, tmp_path: Path) -> None:
    out = _report(tmp_path, HOSTILE_FILE, HOSTILE_TOKENS, HOSTILE_LITERAL, HOSTILE_GRAMMAR)
    pages = _markup(out)
    # the hostile strings reach every kind of page the report writes
    assert {"index.html", "pr-review-tables.md", "vocab/crafted.html", "html/forced/crafted.html"} <= set(pages)
    found = []
    for rel, m in pages.items():
        found += [f"{rel}: <{t}>" for t in sorted(m.tags - control.tags)]
        found += [f"{rel}: <{t} {a}=…>" for t, a in sorted(m.attrs - control.attrs)]
        found += [f"{rel}: {u}" for u in sorted(m.urls - control.urls)]
    assert not found, "input text became markup:\n" + "\n".join(found)
