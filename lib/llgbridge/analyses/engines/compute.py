"""The other engines on llama.cpp (issue 46): constrained-decoding libraries that build their own
token table from a llama.cpp vocab, audited as the bridges are.

Each entry of `ENGINES` names a library, its pinned version and its adapter module
(`adapters.NAME` beside this module), which builds the table and the masks by calling the library's own
llama.cpp integration on a llama-cpp-python `Llama(vocab_only=True)`. Adding an engine touches
this list, one adapter module and a test (tests/test_engines.py checks the list against
`adapters/` and the pins in pyproject.toml and environment.yml).

Per engine and vocab: the census (its table against `llama_token_to_piece(t, 0, false)`, the
truth the suite uses), the leak (its mask at position 0 of the leak grammar's regex form,
judged by real bytes against the truth bridge's mask) and the forced walk (its mask along the
forced literal). Each engine runs in a forked process of its own, bounded by `LIMIT_S`: one that
raises, hangs or dies is one line naming engine, vocab and cause, and the others go on.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, cast

from ...errors import InputError, first_line
from ...grammars import FORCED_LITERAL
from ...paths import ROOT
from ...show import show
from ..native.builder import vendored_commit
from ..native.crashes import crash_cause, says_crash
from . import EnginesPayload
from .adapters import Pattern
from .adapters.gbnf import piece

# the leak grammar `start: /[.a-z]{2,6}/ "!"` (grammars.LEAK_GRAMMAR) in the engines' regex language
LEAK_REGEX = "[.a-z]{2,6}!"
# the same in GBNF, as the issue wrote it for llama.cpp's grammar sampler
LEAK_GBNF = 'root ::= [.a-z]{2,6} "!"'
# seconds one engine may take on one vocab (load, table, three masks, the forced walk): the page
# states it; lm-format-enforcer's table on a 262144-token vocab takes about 10 s here
LIMIT_S = 300
MAX_STEPS = 64
N_EXAMPLES = 5
FFFD = "\ufffd".encode()
# an engine whose pins conflict with the suite's is installed apart by `make setup`, one folder each
# (pip install --target), from its pins file in SIDECAR_PINS
SIDECARS = ROOT / ".venv" / "sidecars"
SIDECAR_PINS = Path(__file__).parent / "sidecars"


@dataclass(frozen=True)
class Engine:
    name: str  # the library, as its distribution is named
    version: str  # pinned in pyproject.toml and environment.yml
    adapter: str  # its module in llgbridge.adapters
    table: str  # one line: how its integration builds the token table
    tokenizes: str  # one line: whether it tokenizes text on the mask path (bug B's class)
    also: tuple[tuple[str, str], ...] = ()  # further distributions it runs on, pinned: (name, version)
    dist: str = ""  # the distribution its version is read from, where that is not `name`
    # where its token table is a bridge the suite already audits: that bridge and the line of the
    # library's code that builds it; the engines analysis does not measure it again
    same_as: str = ""
    # installed apart from the venv (SIDECARS / name, its pins in SIDECAR_PINS / name.txt): its
    # pins conflict with the suite's
    sidecar: bool = False

    @property
    def distribution(self) -> str:
        return self.dist or self.name

    def sidecar_dir(self) -> Path:
        return SIDECARS / self.name


ENGINES: tuple[Engine, ...] = (
    Engine(
        "lm-format-enforcer",
        "0.11.3",
        "lmfe",
        'llm.detokenize([token_0, t]).decode("utf-8")[1:] with token_0 = llm.tokenize(b"0")[-1]; '
        '"\ufffd" where that raises',
        'llm.tokenize(b"0") once: its last token prefixes every table entry (on bert-bge and nomic-bert-moe '
        "the end token tokenize appends, with no text)",
    ),
    Engine(
        "outlines",
        "1.3.3",
        "outlines_core",
        'llama_token_to_piece(t, 0, special=True) decoded with errors="replace" into a dict text -> id',
        "never: outlines-core walks its own index of the table",
        also=(("outlines-core", "0.2.14"),),
    ),
    Engine(
        "llama.cpp GBNF",
        "0.3.36",
        "gbnf",
        "llama_token_to_piece(t, 0, special=True), the vocab's piece cache llama-grammar.cpp reads; "
        "end-of-generation tokens apart (admitted only where the grammar can end), empty pieces never",
        "never: the sampler decodes each piece's UTF-8 itself, partial sequences carried between tokens",
        dist="llama-cpp-python",
    ),
    Engine(
        "guidance",
        "0.3.1",
        "",
        "llguidance.llamacpp.lltokenizer_from_vocab(vocab): llama_token_to_piece(t, 0, special=True), "
        "control tokens behind 0xFF",
        "llguidance's tokenize_fn, llama_tokenize through the vocab (the sentinel bridge's)",
        also=(("llguidance", "1.5.0"), ("guidance-stitch", "0.1.5")),
        same_as="the sentinel bridge (guidance/models/_llama_cpp.py:68: llguidance.llamacpp.lltokenizer_from_vocab)",
        sidecar=True,
    ),
)
BY_NAME = {e.name: e for e in ENGINES}
# engines issue 46 named that are not run, each with the reason the page gives (measured figures)
LEFT_OUT: dict[str, str] = {
    "xgrammar": (
        "xgrammar 0.2.9's wheel is 1.3 MiB, but it imports torch at module level and declares torch, "
        "transformers and triton as requirements: pip download of it with its requirements is 61 wheels, "
        "2928 MiB (torch 529 MiB, CUDA libraries, triton 236 MiB), more than the two-command setup can "
        "take; a CPU torch is not what the registry serves by default"
    ),
}


def check_names(names: list[str]) -> None:
    """An unknown engine name is the caller's error, in one line, before anything runs."""
    for name in names:
        if name not in BY_NAME:
            raise InputError("parameter engines_run", f"unknown engine {name!r}; choose among {', '.join(BY_NAME)}")


def installed_version(e: Engine) -> str:
    """The installed versions, as the table's `version` column shows them; `not installed` when
    not. A sidecar engine's are read from its own folder, never from the venv's."""
    found = {}
    if e.sidecar:
        found = {d.metadata["Name"].lower(): d.version for d in metadata.distributions(path=[str(e.sidecar_dir())])}
    parts = []
    for name, _ in ((e.distribution, e.version), *e.also):
        try:
            got = found.get(name.lower()) if e.sidecar else metadata.version(name)
        except metadata.PackageNotFoundError:
            got = None
        parts.append(f"{name} {got}" if got else f"{name} not installed")
    if e.adapter == "gbnf" and (commit := vendored_commit()):
        # the sampler is the vendored llama.cpp's, compiled into llama-cpp-python's libllama
        parts.append(f"llama.cpp {commit[:7]}")
    return ", ".join(parts)


@dataclass
class Truth:
    """What the engines are judged by, computed once per vocab in the parent process."""

    pieces: list[bytes]  # llama_token_to_piece(t, 0, false)
    legal: set[int]  # the truth bridge's mask at position 0 of grammars.LEAK_GRAMMAR
    eog: frozenset[int]
    # bug C's literal: the end-of-turn token's text inside plain text (`native.trace.special_literal`), or ""
    special: str = ""


@dataclass
class Census:
    other_bytes: list[int] = field(default_factory=list)  # held, non-empty real piece, other bytes, no U+FFFD added
    fffd: list[int] = field(default_factory=list)  # held with a U+FFFD its real piece does not have
    special_text: list[int] = field(default_factory=list)  # empty real piece (control), text in the table
    missing: list[int] = field(default_factory=list)  # non-empty real piece, no entry
    # held with no bytes at all: such a token spells nothing, so the engine admits it wherever any
    # text may follow (the truth holds a control token behind a marker no grammar matches)
    empty: list[int] = field(default_factory=list)
    collapsed: list[int] = field(default_factory=list)  # shares its text with an id of other real bytes


def census(table: dict[int, bytes], pieces: list[bytes]) -> Census:
    """The engine's `table` against the real pieces. A missing id's text is its real piece read as
    the engines read text (UTF-8, U+FFFD for what is not), to say what it collapsed onto."""
    c = Census()
    groups: dict[bytes, set[bytes]] = {}
    texts: dict[int, bytes] = {}
    for t, p in enumerate(pieces):
        got = table.get(t)
        if got is None:
            if p:
                c.missing.append(t)
                texts[t] = p.decode("utf-8", "replace").encode()
        elif not p:
            # llguidance's marker (the truth bridge's table) spells no text a grammar can match
            if got and not got.startswith(b"\xff"):
                c.special_text.append(t)
            elif not got:
                c.empty.append(t)
        else:
            texts[t] = got
            if not got:
                c.empty.append(t)
            if got != p:
                (c.fffd if FFFD in got and FFFD not in p else c.other_bytes).append(t)
    for t, text in texts.items():
        groups.setdefault(text, set()).add(pieces[t])
    c.collapsed = [t for t, text in texts.items() if len(groups[text]) > 1]
    return c


class EngineFault(Exception):
    """The engine raised where the audit asked it for a mask; `str()` is the row's one-line error,
    naming where."""


def said(e: BaseException) -> str:
    """What an engine raised, in one line: its type, message and the line of code that raised it."""
    tb = traceback.extract_tb(e.__traceback__)
    where = f" (at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno})" if tb else ""
    return f"{type(e).__name__}: {first_line(str(e)) or 'no message'}{where}"


def regex_literal(s: str) -> str:
    """`s` as a regex both engines read: only the metacharacters escaped (outlines-core's regex
    refuses an escaped space, which `re.escape` writes)."""
    return "".join("\\" + ch if ch in r"\.^$|?*+()[]{}" else ch for ch in s)


def gbnf_literal(s: str) -> str:
    """`s` as a GBNF grammar of that one string (llama-grammar.cpp's escapes)."""
    esc = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    return 'root ::= "' + "".join(esc.get(ch, ch) for ch in s) + '"'


def literal(s: str) -> Pattern:
    return Pattern(regex_literal(s), gbnf_literal(s))


LEAK = Pattern(LEAK_REGEX, LEAK_GBNF)


def in_vocab(allowed: list[int], truth: Truth) -> tuple[list[int], list[int]]:
    """The ids a mask allows, split: (tokens of the vocab, ids that are none). lm-format-enforcer's
    end-of-sequence id is llama.cpp's `llama_token_eos`, -1 on a vocab with none (bert-bge): never
    walked, never read as a piece (Python's -1 would read the last one), said in the row."""
    n = len(truth.pieces)
    return [t for t in allowed if 0 <= t < n], [t for t in allowed if not 0 <= t < n]


def _leak(data: Any, truth: Truth) -> dict[str, Any]:
    ids, beyond = in_vocab(data.walker(LEAK).allowed(), truth)
    return {
        "allowed": len(ids),
        "with_space": [t for t in ids if b" " in truth.pieces[t]],
        "illegal": [t for t in ids if t not in truth.legal],
        "legal_masked": sorted(truth.legal - set(ids)),
        # the grammar cannot end at position 0: an end token admitted here ends the output unfinished
        "eog": [t for t in ids if t in truth.eog],
        "outside": beyond,
    }


def _forced(data: Any, truth: Truth, text: str) -> dict[str, Any]:
    """The walk along the literal `text`: its mask at each step, following the lowest allowed id
    with bytes; the end tokens admitted before the literal is complete (where the grammar cannot
    end), and the control tokens (no real bytes, no end token) admitted at any step."""
    target = text.encode()
    w = data.walker(literal(text))
    out, steps = b"", 0
    first: list[int] = []
    beyond: set[int] = set()
    eog: set[int] = set()
    control: set[int] = set()
    try:
        for i in range(MAX_STEPS):
            allowed, none = in_vocab(w.allowed(), truth)
            beyond |= set(none)
            if out != target:
                eog |= {t for t in allowed if t in truth.eog}
            control |= {t for t in allowed if not truth.pieces[t] and t not in truth.eog}
            if i == 0:
                first = allowed
            # a token with no real bytes would keep the walk where it is: taken only when nothing else is
            choice = sorted((t for t in allowed if t not in truth.eog), key=lambda t: not truth.pieces[t])
            if not choice:
                break
            out += truth.pieces[choice[0]]
            steps = i + 1
            w.advance(choice[0])
    except Exception as e:
        # a mask the engine could not give is no finding of its: the walk so far measured nothing
        # about the literal, so the engine's row is this one line and no figure
        raise EngineFault(f"the forced walk, step {steps}: {said(e)}") from e
    not_prefix = [t for t in first if not (truth.pieces[t] and target.startswith(truth.pieces[t]))]
    return {
        "allowed": len(first),
        "not_prefix": not_prefix,
        "literal": text,
        "output": out,
        "steps": steps,
        "outside": sorted(beyond),
        "eog": sorted(eog),
        "control": sorted(control),
    }


def control_probe(llm: Any, truth: Truth) -> tuple[int, str] | None:
    """The lowest control token that is no end token and whose text (`llama_token_to_piece(t, 0,
    special=True)`) is printable UTF-8: (id, text), or None. Its text as a literal asks an engine
    whether it admits the control token where the text is due (llama-bpe: 128000 `<|begin_of_text|>`)."""
    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    for t, p in enumerate(truth.pieces):
        if p or t in truth.eog:
            continue
        try:
            text = piece(vocab, t).decode("utf-8")
        except UnicodeDecodeError:
            continue
        if text.strip() and text.isprintable():
            return t, text
    return None


def _control(data: Any, truth: Truth, probe: tuple[int, str] | None) -> dict[str, Any]:
    """The mask at position 0 of the control token's text then `x`: whether the token is admitted
    (as its text: what the text would be spelled by), and every control token admitted."""
    if probe is None:
        return {"token": None, "text": "", "admitted": False, "control": []}
    token, text = probe
    ids, _ = in_vocab(data.walker(literal(text + "x")).allowed(), truth)
    return {
        "token": token,
        "text": text,
        "admitted": token in ids,
        "control": [t for t in ids if not truth.pieces[t] and t not in truth.eog],
    }


def examples(ids: list[int], table: dict[int, bytes], truth: Truth) -> list[dict[str, Any]]:
    return [
        {"token": t, "real": show(truth.pieces[t]), "engine": show(table[t]) if t in table else "(no entry)"}
        for t in ids[:N_EXAMPLES]
    ]


def _asked(question: Any) -> dict[str, Any]:
    """One of the questions issue 59 added, whose refusal is its own column's one line, not the
    row's: outlines-core refuses to build bug C's literal on deepseek-coder (its table cannot spell
    the byte 0xEF of the end token's full-width bar), and the census, leak and forced walk it
    answered stay measured."""
    try:
        return dict(question())
    except Exception as e:  # noqa: BLE001 - whatever the library raises is the question's one line
        return {"error": str(e) if isinstance(e, EngineFault) else said(e)}


def audit(engine: Engine, llm: Any, truth: Truth) -> dict[str, Any]:
    """One engine on one vocab, through its adapter: the row's figures and the examples."""
    adapter = importlib.import_module(f"{__package__}.adapters.{engine.adapter}")
    t0 = time.perf_counter()
    data = adapter.make_tokenizer_data(llm)
    c = census(data.table, truth.pieces)
    leak = _leak(data, truth)
    forced = _forced(data, truth, FORCED_LITERAL)
    special = _asked(lambda: _forced(data, truth, truth.special)) if truth.special else None
    control = _asked(lambda: _control(data, truth, control_probe(llm, truth)))
    return {
        "census": {k: list(v) for k, v in vars(c).items()},
        "held": len(data.table),
        "leak": leak,
        "forced": forced,
        "special": special,
        "special_literal": truth.special,
        "control": control,
        "notes": data.notes,
        "seconds": time.perf_counter() - t0,
        "table": {t: data.table[t] for k in vars(c).values() for t in k[:N_EXAMPLES] if t in data.table},
    }


def load_llama(path: str, overrides: tuple[Any, ...]) -> Any:
    """llama-cpp-python's `Llama` on the input, vocab only, with the input's key overrides."""
    import llama_cpp

    kv = {o.key: (str(o.value) if o.type == "str" else o.value) for o in overrides}
    return llama_cpp.Llama(path, vocab_only=True, verbose=False, kv_overrides=kv or None)


def _child(conn: Any, log: int, fn: Any, args: tuple[Any, ...]) -> None:
    # the process's own output (llama.cpp's log, an uncaught C++ exception, the gdb backtrace
    # ggml's abort handler prints, with its process ids) goes to `log`, never to the kernel's
    # output: the parent reads the cause from it, and the notebook stays the same from run to run
    os.dup2(log, 1)
    os.dup2(log, 2)
    try:
        conn.send(("ok", fn(*args)))
    except BaseException as e:  # noqa: BLE001 - whatever the library raises is its one line
        conn.send(("error", str(e) if isinstance(e, EngineFault) else said(e)))
    finally:
        conn.close()


def _died(exitcode: int | None, said: bytes) -> str:
    """Why a child that sent no answer ended: its exit or signal, and the cause its own output
    gives (`native.crashes.crash_cause`: llama.cpp's assertion, an uncaught C++ exception, ...)."""
    sig = -(exitcode or 0)
    why = " (out of memory, or killed)" if sig == 9 else ""
    text = said.decode("utf-8", "replace")
    cause = crash_cause(text, 128 + sig if sig > 0 else exitcode) if says_crash(text) else ""
    return f"its process ended without an answer (exit {exitcode}{f', signal {sig}' if sig > 0 else ''}{why})" + (
        f": {cause}" if cause else ""
    )


def run_limited(fn: Any, args: tuple[Any, ...], path: str, limit_s: float = LIMIT_S) -> tuple[Any, str]:
    """`fn(*args)` in a forked process bounded by `limit_s`: (its result, "") or (None, the cause
    in one line: what it raised, that it ran past the limit, or the signal that ended it with the
    cause its output gives), the input's `path` written as its file name."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    with tempfile.TemporaryFile() as log:
        p = ctx.Process(target=_child, args=(send, log.fileno(), fn, args), daemon=True)
        p.start()
        send.close()
        try:
            if not recv.poll(limit_s):
                p.kill()
                return None, f"no answer within the {limit_s:g} s limit: stopped"
            status, got = recv.recv()
        except EOFError:
            p.join(5)
            log.seek(0)
            got, status = _died(p.exitcode, log.read()), "error"
        finally:
            p.join(5)
            if p.is_alive():
                p.kill()
            recv.close()
    # the input is named by its file name: a result never holds a path of the machine it ran on
    return (got, "") if status == "ok" else (None, got.replace(path, Path(path).name))


def _audit_at(engine: Engine, path: str, overrides: tuple[Any, ...], truth: Truth) -> dict[str, Any]:
    return audit(engine, load_llama(path, overrides), truth)


def run_engine(
    engine: Engine, path: str, overrides: tuple[Any, ...], truth: Truth, limit_s: float = LIMIT_S
) -> tuple[dict[str, Any] | None, str]:
    """`audit` in a process of its own bounded by `limit_s` (`run_limited`)."""
    got, err = run_limited(_audit_at, (engine, path, overrides, truth), path, limit_s)
    return got, err


def prefix_mechanism(notes: dict[str, str]) -> str:
    """What lm-format-enforcer's prefix token does to its table, from its own calls (the tokens of
    `tokenize(b"0")`, the last one's text): "" where the text is `0` (the strip of one character
    strips it), else the mechanism in a few words."""
    token, text = notes["prefix_token"], notes["prefix_text"]
    if text == "0":
        return ""
    if text == "":
        probe = notes["prefix_tokens"]
        return (
            f"prefix token {token} (the last of tokenize(b'0') = [{probe}]) has no text: "
            "[1:] cuts each token's first character"
        )
    if text.endswith("0") and not text[:-1].strip():
        return f"prefix token {token} is {text!r}: tokenize added a space, and [1:] leaves it"
    return f"prefix token {token} is {text!r}, not '0': [1:] leaves other text"


def end_inside(got: dict[str, Any]) -> list[int]:
    """The end-of-generation tokens a mask admitted where the grammar cannot end: at position 0 of
    the leak regex, along the forced literal and bug C's literal before each is complete."""
    walks = [got["forced"], got.get("special") or {}]
    return sorted(set(got["leak"]["eog"]).union(*(w.get("eog", []) for w in walks)))


def classes(got: dict[str, Any]) -> dict[str, str]:
    """The classes for one engine on one vocab, from its figures: A, a held token with other bytes
    than its real piece (U+FFFD included); B, text the library's own tokenize gave it that is not
    the text it assumed (lm-format-enforcer's prefix token: `prefix_mechanism`); C, a control token
    with text; end, an end token admitted where the grammar cannot end (inside a string)."""
    c = got["census"]
    notes = got["notes"]
    return {
        "bug_a": "yes" if c["other_bytes"] or c["fffd"] else "no",
        "bug_b": "n/a" if "prefix_text" not in notes else ("yes" if prefix_mechanism(notes) else "no"),
        "bug_c": "yes" if c["special_text"] else "no",
        "bug_end": "yes" if end_inside(got) else "no",
    }


def engine_row(vocab: str, engine: Engine, version: str, got: dict[str, Any]) -> dict[str, Any]:
    c, leak, forced = got["census"], got["leak"], got["forced"]
    ctl, special = got["control"], got.get("special")
    return {
        "vocab": vocab,
        "engine": engine.name,
        "version": version,
        "held": got["held"],
        **{k: len(v) for k, v in c.items()},
        **classes(got),
        "allowed": leak["allowed"],
        "allowed_with_space": len(leak["with_space"]),
        "allowed_illegal": len(leak["illegal"]),
        "legal_masked": len(leak["legal_masked"]),
        "forced_allowed": forced["allowed"],
        "forced_not_prefix": len(forced["not_prefix"]),
        "forced_output": forced["output"].decode("utf-8", "backslashreplace"),
        "forced_output_ok": forced["output"] == FORCED_LITERAL.encode(),
        # ids its masks allowed that are no token (its end-of-sequence id where the vocab has none)
        "allowed_outside_vocab": " ".join(str(t) for t in sorted(set(leak["outside"]) | set(forced["outside"]))),
        "prefix_text": got["notes"].get("prefix_text", ""),
        "prefix_token": got["notes"].get("prefix_token", ""),
        "bug_b_mechanism": prefix_mechanism(got["notes"]) if "prefix_text" in got["notes"] else "",
        "end_inside": " ".join(map(str, end_inside(got))),
        "control_probe": f"{ctl['token']} {ctl['text']}" if ctl.get("token") is not None else "",
        "control_admitted": ctl["admitted"] if ctl.get("token") is not None else "",
        "control_admitted_n": len(ctl["control"]) if "control" in ctl else "",
        "control_error": ctl.get("error", ""),
        "special_literal": got.get("special_literal", ""),
        "special_output_ok": special["output"] == special["literal"].encode()
        if special and "output" in special
        else "",
        # a count: lm-format-enforcer admits 6246 control tokens there on gemma3-270m
        "special_control": len(special["control"]) if special and "control" in special else "",
        "special_error": special.get("error", "") if special else "",
    }


def run_engines(
    vocab: str, path: str, overrides: tuple[Any, ...], truth: Truth, names: list[str], limit_s: float = LIMIT_S
) -> EnginesPayload:
    """Every named engine on one vocab: the `engines` result's payload. An engine not installed, or
    one that fails, is a row with its one-line `error`; the others go on."""
    rows: list[dict[str, Any]] = []
    detail: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    for name in names:
        e = BY_NAME[name]
        version = installed_version(e)
        if e.same_as:
            # its table is a bridge the suite audits already, with that bridge's figures
            rows.append({"vocab": vocab, "engine": e.name, "version": version, "same_as": e.same_as})
            continue
        if "not installed" in version:
            rows.append({"vocab": vocab, "engine": e.name, "version": version, "error": f"{version}: not run"})
            continue
        got, err = run_engine(e, path, overrides, truth, limit_s)
        if got is None:
            rows.append({"vocab": vocab, "engine": e.name, "version": version, "error": err})
            continue
        rows.append(engine_row(vocab, e, version, got))
        seconds[e.name] = round(got["seconds"], 3)
        detail[e.name] = _detail(got, truth)
    return cast(EnginesPayload, {"rows": rows, "examples": detail, "seconds": seconds, "limit_s": limit_s})


def _detail(got: dict[str, Any], truth: Truth) -> dict[str, Any]:
    table = got["table"]
    out = {k: examples(v, table, truth) for k, v in got["census"].items()}
    out["leak_illegal"] = examples(got["leak"]["illegal"], table, truth)
    out["leak_legal_masked"] = examples(got["leak"]["legal_masked"], table, truth)
    out["forced_not_prefix"] = examples(got["forced"]["not_prefix"], table, truth)
    out["end_inside"] = examples(end_inside(got), table, truth)
    return out
