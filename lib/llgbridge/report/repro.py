"""The commands a maintainer pastes into a llama.cpp checkout to see each headline finding, and what
each answers before and after the fix, from this suite's own runs of the same thing.

Two levels, as guide 8 gives them:

- unit: `cmake` with `LLAMA_LLGUIDANCE=ON`, then `test-grammar-llguidance` on one of llama.cpp's
  vocab fixtures; "without the fix" is the PR's test with `common/llguidance.cpp` reverted (the
  guide's `git stash push -- common/llguidance.cpp`), which is this suite's `test-pr-upstream`;
- server: the `llama-server` command line and the `curl` request, the body exactly as the suite's
  server analysis sent it (`server.request_for`), with the answer it got.

The expected answers come from the results (native and server, llguidance as llama.cpp pins it),
never from this file; `tests/test_repro.py` runs the run-time part of each command (the suite's
binary in place of `./build/bin/...`, the same arguments, the same body through `curl`) and checks
that it answers what the page prints.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass
from typing import Any

from .. import generation as G
from ..analyses.native.compute import LLG_PINNED as NATIVE_PIN
from ..analyses.server import compute as server
from ..analyses.server.llama_server import LLG_PINNED
from ..grammars import FORCED_LITERAL
from ..show import show_text
from . import gfm
from .data import PageData
from .table import guide_order, pinned_rows

BUILD = (
    "cmake -B build -DLLAMA_LLGUIDANCE=ON -DLLAMA_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release",
    'cmake --build build --target test-grammar-llguidance llama-server -j"$(nproc)"',
)
REVERT = (
    "git stash push -- common/llguidance.cpp",
    'cmake --build build --target test-grammar-llguidance llama-server -j"$(nproc)"',
)
RESTORE = "git stash pop"
TEST_EXE = "./build/bin/test-grammar-llguidance"
SERVER_EXE = "./build/bin/llama-server"
PORT = 8080
# the flags the server analysis starts every build with that decide what it answers: one slot of
# 512 tokens, one thread, no warm-up; --no-repack keeps ggml's AMX kernels away on a CPU that has them
SERVER_FLAGS = (
    "--host",
    "127.0.0.1",
    "--port",
    str(PORT),
    "-c",
    "512",
    "-np",
    "1",
    "-t",
    "1",
    "--no-warmup",
    "--no-repack",
)
QUOTE = 40  # characters of an answer's content the page quotes (the test checks them)


@dataclass(frozen=True)
class UnitRepro:
    finding: str
    vocab: str
    without: int  # the PR's test's exit code with common/llguidance.cpp reverted
    with_: int  # and with the PR
    note: str = ""

    @property
    def fixture(self) -> str:
        return f"models/ggml-vocab-{self.vocab}.gguf"

    @property
    def command(self) -> str:
        return f"{TEST_EXE} {self.fixture}; echo $?"


@dataclass(frozen=True)
class Answer:
    http_status: int
    error_field: bool
    content: str  # the first QUOTE characters of what the server answered
    stop_type: str
    outcome: str  # as the suite judged it: pass, violation, ignored...

    def said(self) -> str:
        return (
            f"HTTP {self.http_status}, {'an' if self.error_field else 'no'} error field, content "
            f"{gfm.code_span(show_text(self.content) or repr(''))}"
            f"{'…' if self.outcome != 'pass' and self.content else ''}, stop_type {self.stop_type} ({self.outcome})"
        )


@dataclass(frozen=True)
class ServerRepro:
    finding: str
    vocab: str  # the fixture whose tokenizer the model is built around
    model: str  # the file the suite served
    synthetic: bool
    case: str
    endpoint: str
    body: dict[str, Any]
    without: Answer
    with_: Answer

    def server_command(self, exe: str = SERVER_EXE, model: str = "") -> str:
        return shlex.join([exe, "-m", model or self.model, *SERVER_FLAGS])

    def curl(self, port: int = PORT) -> str:
        return shlex.join(
            [
                "curl",
                "-s",
                f"http://127.0.0.1:{port}{self.endpoint}",
                "-H",
                "Content-Type: application/json",
                "-d",
                json.dumps(self.body, ensure_ascii=False),
            ]
        )


def unit_repros(res: PageData) -> list[UnitRepro]:
    """The PR's test on the two ctest vocabs (bug A; bugs A and B) and on the first vocab where it
    still aborts with the fix through bug D, with both exit codes from the native results."""
    ok, _ = res.load("native")
    rows = {r["vocab"]: {x["sampler"]: x for x in pinned_rows(r)} for r in ok}
    out = []
    for v, finding in (
        ("llama-bpe", "bug A (a BPE vocab, the one CI runs)"),
        ("llama-spm", "bugs A and B (SentencePiece, the ctest entry the PR adds)"),
    ):
        r = rows.get(v, {})
        if "upstream" in r and "fixed" in r:
            out.append(UnitRepro(finding, v, int(r["upstream"]["pr_test_exit"]), int(r["fixed"]["pr_test_exit"])))
    limit = [
        v
        for v in guide_order(list(rows))
        if "Too many items" in str(rows[v].get("fixed", {}).get("pr_test_llg_error", ""))
        and "fixed" in rows[v]
        and "upstream" in rows[v]
    ]
    if limit:
        r = rows[limit[0]]
        # without the fix the test may abort first on another bug: say the one its own run named
        first = str(r["upstream"].get("pr_test_rule") or "")
        before = "bug A" if first == "space_tokens" else "bug D" if first == "llg_limit" else first.replace("_", " ")
        out.append(
            UnitRepro(
                "bug D, beyond the PR (the item limit)"
                if before == "bug D"
                else f"{before} without the PR, bug D with it",
                limit[0],
                int(r["upstream"]["pr_test_exit"]),
                int(r["fixed"]["pr_test_exit"]),
                'with the fix the log\'s `llg error` is "Too many items (limit 50000; mask)"'
                + (f"; without it the test aborts first on {before}" if before != "bug D" else ""),
            )
        )
    return out


# (finding, vocab, case): the guide's two failure modes on SentencePiece, bug A on a BPE vocab, and
# two findings beyond the PR that are the same on both builds
SERVER_FINDINGS = (
    ("bug B: the forced literal becomes free text", "llama-spm", "forced_literal"),
    ("bug A: a JSON key with a space in it", "llama-spm", "json_enum"),
    ("bug A on a BPE vocab: a space the grammar forbids", "llama-bpe", "dots"),
    ("bug C, beyond the PR: special-token text ends the turn", "llama-bpe", "special_literal"),
    ("beyond the PR: a schema llguidance cannot compile is ignored", "llama-bpe", "rejected_schema"),
)


def _answer(row: dict[str, Any]) -> Answer:
    text = str(row.get("output", "")).split("…[", 1)[
        0
    ]  # the recorded text's tail marker is the suite's, not the server's
    return Answer(
        int(row["http_status"]),
        bool(row["error_field"]),
        text[:QUOTE],
        str(row.get("stop_type", "")),
        str(row["outcome"]),
    )


def server_repros(res: PageData) -> list[ServerRepro]:
    """Each server finding on the synthetic model the suite served it on: the request as the
    server analysis sent it, and both builds' answers (llguidance as llama.cpp pins it)."""
    ok, _ = res.load("server")
    by_vocab = {r["vocab"]: r for r in ok if r["rows"] and r["rows"][0].get("synthetic")}
    out = []
    for finding, v, case in SERVER_FINDINGS:
        r = by_vocab.get(v)
        if r is None or case not in r.get("cases", {}):
            continue
        spec = r["cases"][case]
        got = {x["sampler"]: x for x in r["rows"] if x["case"] == case and x["llguidance"] == LLG_PINNED}
        if not {"upstream", "fixed"} <= set(got):
            continue
        prompt = G.Prompt(spec["prompt"], spec["prompt_kind"])
        lookup = "forced_literal" if case == server.SPECIAL_CASE else case  # its grammar is the result's own record
        endpoint, _, body = server.request_for(
            lookup, prompt, int(r["max_tokens"]), int(r["seed"]), float(r["temperature"])
        )
        if case == server.SPECIAL_CASE:
            body = {**body, "grammar": "%llguidance {}\n" + spec["grammar"]}
        out.append(
            ServerRepro(
                finding, v, r["model"], True, case, endpoint, body, _answer(got["upstream"]), _answer(got["fixed"])
            )
        )
    return out


# the comment's server checks, on a public model: each case's grammar as the regex a reader checks the
# server's `content` against (the grammars are `cases.CASES`' own)
PASTE_CASES = (
    ("bug B: the forced literal", "forced_literal", FORCED_LITERAL),
    ("bug A: a space the grammar forbids", "dots", "[.]{2,6}!"),
)
PASTE_FLAGS = ("--port", str(PORT), "-c", "512", "-np", "1", "-t", "1", "--no-warmup", "--no-repack")


@dataclass(frozen=True)
class PasteCheck:
    """One request of the comment's server block, and whether the server's `content` matched the
    grammar (its regex, in full) with the PR and without it, as this suite's server runs saw it."""

    finding: str
    case: str
    body: dict[str, Any]
    regex: str
    with_: bool
    without: bool

    def curl(self, port: int = PORT) -> str:
        # the body's fields in a reader's order, whatever order a stored copy keeps them in
        order = {k: i for i, k in enumerate(("prompt", "n_predict", "temperature", "grammar"))}
        shown = dict(sorted(self.body.items(), key=lambda kv: order.get(kv[0], len(order))))
        body = json.dumps(shown, ensure_ascii=False, separators=(",", ":"))
        return f"curl -s localhost:{port}/completion -d {shlex.quote(body)}"

    def expect(self) -> str:
        def said(ok: bool) -> str:
            return f"content matches ^{self.regex}$" if ok else "HTTP 200, no error field, content does not match"

        return f"# {self.finding}: with the PR {said(self.with_)}; without it {said(self.without)}"


def paste_server(res: PageData, model: str, file: str, overrides: tuple[str, ...]) -> dict[str, Any] | None:
    """The comment's server block on a public model (`model`, an input of the server analysis):
    the command line, and each check with both answers (llguidance as llama.cpp pins it)."""
    ok, _ = res.load("server")
    r = next((x for x in ok if x["vocab"] == model), None)
    if r is None:
        return None
    checks = []
    for finding, case, regex in PASTE_CASES:
        got = {x["sampler"]: x for x in r["rows"] if x["case"] == case and x["llguidance"] == LLG_PINNED}
        spec = r.get("cases", {}).get(case)
        if not spec or not {"upstream", "fixed"} <= set(got):
            continue
        # the body as the server analysis sent it, less the fields that change nothing a reader checks
        # (seed at temperature 0, return_tokens, cache_prompt): the test runs this shorter line as printed
        _, _, sent = server.request_for(
            case,
            G.Prompt(spec["prompt"], spec["prompt_kind"]),
            int(r["max_tokens"]),
            int(r["seed"]),
            float(r["temperature"]),
        )
        body = {k: sent[k] for k in ("prompt", "n_predict", "temperature", "grammar")}
        passed = {b: got[b]["outcome"] == "pass" for b in ("upstream", "fixed")}
        checks.append(asdict(PasteCheck(finding, case, body, regex, passed["fixed"], passed["upstream"])))
    override = [a for o in overrides for a in ("--override-kv", o)]
    return {
        "model": model,
        "file": file,
        "server": shlex.join([SERVER_EXE, "-m", file, *override, *PASTE_FLAGS]),
        "checks": checks,
    }


def paste_units(res: PageData) -> list[dict[str, Any]]:
    return [asdict(u) | {"command": u.command} for u in unit_repros(res)]


def markdown(res: PageData) -> str:
    """The commands and their answers, as the page and the PR comment print them (Markdown)."""
    units, servers = unit_repros(res), server_repros(res)
    if not units and not servers:
        return ""
    lines = []
    if units:
        lines += ["**Unit level** (guide 8), in a llama.cpp checkout with the PR applied:", "", "```sh", *BUILD]
        lines += [f"{u.command}   # {u.finding}: {u.with_}" for u in units]
        lines += ["# without the fix: revert common/llguidance.cpp only, keep the PR's tests", *REVERT]
        lines += [f"{u.command}   # {u.without}" for u in units]
        lines += [RESTORE, "```", ""]
        notes = [f"{u.vocab}: {u.note}" for u in units if u.note]
        lines += [
            f"Exit codes as this suite's builds of the same test gave them (134 is an "
            f"abort){': ' + '; '.join(notes) if notes else ''}.",
            "",
        ]
    if servers:
        models = sorted({s.model for s in servers})
        lines += [
            f"**Server level**: start the server on a model, then send the request; run it once built with the fix and "
            f"once without (the unit level's `git stash`). The models are this suite's synthetic ones "
            f"({', '.join(f'`{m}`' for m in models)}: random weights around llama.cpp's own vocab fixture of the same "
            f"name, `make data/models/synthetic-NAME.gguf` in this suite), so the text is noise and only what the "
            f"grammar allows matters; a real model with the same tokenizer shows the same failure modes with other "
            f"words.",
            "",
        ]
        for s in servers:
            lines += [
                f"*{s.finding}* ({s.vocab}, `{s.case}`):",
                "",
                "```sh",
                s.server_command(),
                s.curl(),
                "```",
                "",
                f"- without the fix: {s.without.said()}",
                f"- with the fix: {s.with_.said()}",
                "",
            ]
    return "\n".join(lines).rstrip() + "\n"


__all__ = [
    "PasteCheck",
    "paste_server",
    "paste_units",
    "UnitRepro",
    "ServerRepro",
    "Answer",
    "unit_repros",
    "server_repros",
    "markdown",
    "SERVER_FLAGS",
    "TEST_EXE",
    "SERVER_EXE",
    "PORT",
    "QUOTE",
    "NATIVE_PIN",
]
