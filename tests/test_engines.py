"""The other engines on llama.cpp (issue 46): each figure pinned to something that does not go
through the census, the real pieces by hand or the library's own objects.

Under LLGBRIDGE_SWAP_VARIANTS=1 (`make test-swapped`) every test marked `guards` is given the
truth in place of the engine: the truth bridge's table for the census and its mask for the leak.
Each must then fail on an assertion: that is how it shows it measures the engine.
"""

from __future__ import annotations

import re
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from conftest import SWAP, bridge, vocab

from llgbridge import grammars
from llgbridge.analyses.engines import compute as engines
from llgbridge.analyses.engines.adapters import gbnf, lmfe, outlines_core
from llgbridge.paths import ROOT, vocab_path

ADAPTERS = {"lm-format-enforcer": lmfe, "outlines": outlines_core, "llama.cpp GBNF": gbnf}
GBNF = "llama.cpp GBNF"
# the byte strings that can start a string of `[.a-z]{2,6}!`, by hand (as tests/test_masks.py)
LEAK_PREFIX = re.compile(rb"[.a-z]{0,6}|[.a-z]{2,6}!")


@cache
def tokenizer_data(engine: str, name: str) -> Any:
    return ADAPTERS[engine].make_tokenizer_data(engines.load_llama(str(vocab_path(name)), ()))


def table(engine: str, name: str) -> dict[int, bytes]:
    if SWAP:
        return dict(enumerate(bridge(name, "truth").token_bytes))
    return tokenizer_data(engine, name).table


def leak_allowed(engine: str, name: str) -> list[int]:
    if SWAP:
        return bridge(name, "truth").new_matcher(grammars.LEAK_GRAMMAR).allowed()
    return tokenizer_data(engine, name).walker(engines.LEAK).allowed()


def gbnf_allowed(name: str, text: str) -> list[int]:
    """llama.cpp's grammar sampler's mask at position 0 of the literal `text` (under the swap, the
    truth bridge's mask for the same literal)."""
    if SWAP:
        return bridge(name, "truth").new_matcher(grammars.literal_grammar(text)).allowed()
    return tokenizer_data(GBNF, name).walker(engines.literal(text)).allowed()


@cache
def pieces(name: str) -> list[bytes]:
    return list(vocab(name).iter_pieces())


def census(engine: str, name: str) -> engines.Census:
    return engines.census(table(engine, name), pieces(name))


def test_registry_matches_adapters_and_pins() -> None:
    """Adding an engine is its entry, its adapter module and a test: each entry's adapter exists,
    no adapter is without an entry, and each version is pinned in both dependency files (a sidecar
    engine's in its own pins file, installed apart, and read from there). An engine without an
    adapter is one whose table is a bridge the suite audits already (`same_as`)."""
    mods = {p.stem for p in (ROOT / "lib/llgbridge/analyses/engines/adapters").glob("*.py")} - {"__init__"}
    assert mods == {e.adapter for e in engines.ENGINES if e.adapter}
    assert all(e.same_as for e in engines.ENGINES if not e.adapter)
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    env = (ROOT / "environment.yml").read_text()
    for e in engines.ENGINES:
        pins = (engines.SIDECAR_PINS / f"{e.name}.txt").read_text().splitlines() if e.sidecar else None
        for name, version in ((e.distribution, e.version), *e.also):
            if pins is not None:
                assert f"{name}=={version}" in pins
            else:
                assert f"{name}=={version}" in deps
                assert f"- {name}=={version}\n" in env
            assert f"{name} {version}" in engines.installed_version(e)
    assert set(ADAPTERS) == {e.name for e in engines.ENGINES if e.adapter}


def test_guidance_builds_its_table_with_the_sentinel_bridge() -> None:
    """The registry's line of guidance's code is guidance's own, as installed: its `LlamaCppTokenizer`
    makes its table with llguidance's llama.cpp builder, the suite's `sentinel` bridge; and the
    llguidance it gets is the one it declares (1.5.0), not the venv's."""
    e = engines.BY_NAME["guidance"]
    where, _, call = e.same_as.partition("(")[2].rstrip(")").partition(": ")
    path, line = where.split(":")
    src = (e.sidecar_dir() / path).read_text().splitlines()
    assert src[int(line) - 1].strip() == f"ll_tokenizer = {call}(vocab)"
    assert src[int(line) - 8] == "class LlamaCppTokenizer(Tokenizer):"
    requires = (e.sidecar_dir() / "guidance-0.3.1.dist-info" / "METADATA").read_text()
    assert "Requires-Dist: llguidance==1.5.0\n" in requires
    assert 'Requires-Dist: llama-cpp-python==0.3.16; extra == "llamacpp"\n' in requires


@pytest.mark.guards("lm-format-enforcer holds every piece over 32 bytes as ''")
def test_lmfe_long_pieces_held_empty() -> None:
    """llama-bpe's token 1961 is 35 spaces (`llama_token_to_piece`, by hand); lm-format-enforcer's
    own table holds '' for it: llama-cpp-python's detokenize reads a 32-byte buffer and slices it
    with the negative length llama.cpp returns. Every piece over 32 bytes goes so, and only those."""
    assert pieces("llama-bpe")[1961] == b" " * 35
    if not SWAP:
        lmfe_data = tokenizer_data("lm-format-enforcer", "llama-bpe").data
        assert [s for t, s, _ in lmfe_data.regular_tokens if t == 1961] == [""]
    c = census("lm-format-enforcer", "llama-bpe")
    long = [t for t, p in enumerate(pieces("llama-bpe")) if len(p) > 32]
    assert c.other_bytes == long and len(long) == 231
    assert 1961 in c.empty


@pytest.mark.guards("lm-format-enforcer turns every piece that is not UTF-8 on its own into U+FFFD")
def test_lmfe_fffd() -> None:
    """llama-spm's byte tokens <0x80>..<0xFF> (ids 131..258) are one byte each, not UTF-8 alone:
    each is held as '\ufffd', all 128 on one text."""
    v = vocab("llama-spm")
    assert v.token_to_piece(131) == b"\x80" and v.token_to_piece(258) == b"\xff"
    c = census("lm-format-enforcer", "llama-spm")
    assert c.fffd == list(range(131, 259))
    assert set(range(131, 259)) <= set(c.collapsed)
    assert table("lm-format-enforcer", "llama-spm")[131] == "\ufffd".encode()


@pytest.mark.guards("lm-format-enforcer admits tokens it holds as '' where the grammar forbids them")
def test_lmfe_leak() -> None:
    """At position 0 of `[.a-z]{2,6}!` on llama-bpe, lm-format-enforcer admits exactly the tokens
    it holds with no bytes: the 231 pieces over 32 bytes and the control tokens but BOS and EOS
    (254 of them: 128000..128255, EOT 128009 among them), which no string of the grammar starts
    with (Python's `re` over the real bytes)."""
    allowed = leak_allowed("lm-format-enforcer", "llama-bpe")
    p = pieces("llama-bpe")
    illegal = [t for t in allowed if not (p[t] and LEAK_PREFIX.fullmatch(p[t]))]
    long = [t for t, x in enumerate(p) if len(x) > 32]
    control = [t for t in range(128000, 128256) if t not in (128000, 128001)]
    assert illegal == sorted(long + control)
    assert 128009 in illegal and 1961 in illegal


@pytest.mark.guards("outlines holds control tokens with their text and keeps one id per text")
def test_outlines_census_llama_spm() -> None:
    """llama-spm by hand: token 1 (<s>) is a control token, its real piece empty, held by outlines
    as '<s>'; the byte token <0x20> (35) and '▁' (29871) both spell ' ', and outlines' dict keeps the
    later id, so 35 has no entry. outlines-core's own Vocabulary says the same."""
    t = table("outlines", "llama-spm")
    c = census("outlines", "llama-spm")
    assert pieces("llama-spm")[1] == b"" and t.get(1) == b"<s>"
    assert [0, 1] == c.special_text
    assert 35 in c.missing and t.get(29871) == b" "
    if not SWAP:
        assert tokenizer_data("outlines", "llama-spm").vocabulary.get(" ") == [29871]


@pytest.mark.guards("outlines masks the legal ids whose text another id holds")
def test_outlines_leak_masks_collapsed_ids() -> None:
    """outlines admits nothing illegal at position 0 on llama-spm, but masks the legal ids it has
    no entry for: exactly the legal ids whose real piece another, held id spells (27: the byte
    tokens of '.' and 'a'..'z')."""
    allowed = leak_allowed("outlines", "llama-spm")
    legal = set(bridge("llama-spm", "truth").new_matcher(grammars.LEAK_GRAMMAR).allowed())
    p = pieces("llama-spm")
    held = set(tokenizer_data("outlines", "llama-spm").table.values())
    owned = set(tokenizer_data("outlines", "llama-spm").table)
    expected = sorted(t for t in legal if t not in owned and p[t] in held)
    assert sorted(legal - set(allowed)) == expected
    assert len(expected) == 27 and 49 in expected and p[49] == b"."
    assert set(allowed) <= legal


@pytest.mark.guards("llama.cpp's GBNF sampler admits a control token where its text is due, but not an end token")
def test_gbnf_admits_a_control_token_at_its_text() -> None:
    """By hand with llama.cpp's own sampler (issue 59): on llama-bpe, `root ::= "<|start_header_id|>x"`
    leaves two tokens at position 0, `<` (27) and the control token 128006, whose real piece is
    empty: the sampler reads the piece cache (`special=true`), so the token is its text. EOT 128009
    is held apart: with `root ::= "<|eot_id|>x"` only `<` is left, since the grammar cannot end."""
    p = pieces("llama-bpe")
    assert p[27] == b"<" and p[128006] == b"" and p[128009] == b""
    assert gbnf_allowed("llama-bpe", "<|start_header_id|>x") == [27, 128006]
    assert gbnf_allowed("llama-bpe", "<|eot_id|>x") == [27]


@pytest.mark.guards("llama.cpp's GBNF sampler reads control tokens' text and never a NUL-led piece")
def test_gbnf_table_is_the_piece_cache() -> None:
    """llama-bpe: what the sampler reads is `llama_token_to_piece(t, 0, special=true)`: the control
    tokens 128000..128255 but the end tokens 128001 and 128009 (254) with their text, every other
    token its real piece; token 188 is the byte 0x00, which `llama_grammar_apply_impl` masks
    (`piece[0] == 0`), so it has no entry."""
    t = table(GBNF, "llama-bpe")
    c = census(GBNF, "llama-bpe")
    assert t.get(128006) == b"<|start_header_id|>" and 128009 not in t
    assert c.special_text == [x for x in range(128000, 128256) if x not in (128001, 128009)]
    assert pieces("llama-bpe")[188] == b"\x00" and c.missing == [188]
    assert c.other_bytes == [] and c.fffd == [] and c.empty == []


def test_gbnf_leak_admits_only_legal_pieces() -> None:
    """At position 0 of `root ::= [.a-z]{2,6} "!"` llama.cpp's sampler leaves 15,335 tokens on
    llama-bpe (the issue's hand count), and they are exactly the tokens whose real piece starts a
    string of the regex (Python's `re` over the real bytes): none illegal, none legal masked."""
    allowed = leak_allowed(GBNF, "llama-bpe")
    p = pieces("llama-bpe")
    assert len(allowed) == 15335
    assert allowed == [t for t, x in enumerate(p) if x and LEAK_PREFIX.fullmatch(x)]


@pytest.mark.guards("lm-format-enforcer's prefix token is the end token tokenize appends on bert-bge")
def test_lmfe_prefix_token_is_the_appended_end_token() -> None:
    """lm-format-enforcer prefixes `tokenize(b"0")[-1]` and strips one character. On bert-bge
    `tokenize(b"0")` is [101, 1014, 102]: its last token is [SEP], whose text is empty, so the strip
    cuts each token's own first character: 7592 ' hello' is held 'hello', 3989 'ization' 'zation'.
    No space is added: the class is the prefix token's, named so (`prefix_mechanism`)."""
    p = pieces("bert-bge")
    assert p[102] == b"" and p[7592] == b" hello" and p[3989] == b"ization"
    t = table("lm-format-enforcer", "bert-bge")
    assert (t[7592], t[3989]) == (b"hello", b"zation")
    if not SWAP:
        notes = tokenizer_data("lm-format-enforcer", "bert-bge").notes
        assert (notes["prefix_tokens"], notes["prefix_token"], notes["prefix_text"]) == ("101 1014 102", "102", "")
        assert "has no text: [1:] cuts each token's first character" in engines.prefix_mechanism(notes)


def test_the_pages_reproducers_are_the_docs() -> None:
    """Each reproducer the engines page shows is one of docs/engines.md, byte for byte."""
    from llgbridge.analyses.engines.findings import FINDINGS

    doc = (ROOT / "docs/engines.md").read_text()
    assert len(FINDINGS) == 4
    for f in FINDINGS:
        assert f"```python\n{f.code}```" in doc, f.bugs


def test_forced_walks_along_the_literal() -> None:
    """outlines spells 'hello world' on llama-spm; lm-format-enforcer admits '<unk>' (token 0, no
    bytes) beside h, he, hel, hell, hello at position 0."""
    v = vocab("llama-spm")
    truth = engines.Truth(pieces("llama-spm"), set(), frozenset(v.eog_tokens))
    got = engines._forced(tokenizer_data("outlines", "llama-spm"), truth, grammars.FORCED_LITERAL)
    assert got["output"] == b"hello world" and got["not_prefix"] == []
    lm = engines._forced(tokenizer_data("lm-format-enforcer", "llama-spm"), truth, grammars.FORCED_LITERAL)
    assert lm["not_prefix"] == [0] and v.token_to_piece(0) == b""


def test_an_engine_that_fails_is_one_line(tmp_path: Path) -> None:
    """A file llama-cpp-python cannot load: each engine's row is its one-line error and the run goes
    on to the next (an engine whose table is the sentinel bridge is that one line instead); an
    engine past its limit is stopped and says so."""
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\x00" * 8)
    truth = engines.Truth([b"a"], set(), frozenset())
    got = engines.run_engines("bad", str(bad), (), truth, [e.name for e in engines.ENGINES], limit_s=60)
    assert [r["engine"] for r in got["rows"]] == [e.name for e in engines.ENGINES]
    for r in got["rows"]:
        if engines.BY_NAME[r["engine"]].same_as:
            # its table is a bridge audited elsewhere: nothing of it runs here, on any file
            assert r["same_as"] == engines.BY_NAME[r["engine"]].same_as and "error" not in r, r
            continue
        assert r["error"] and "\n" not in r["error"], r
    res, err = engines.run_engine(engines.ENGINES[0], str(vocab_path("llama-bpe")), (), truth, limit_s=0.2)
    assert res is None and err == "no answer within the 0.2 s limit: stopped"


def _detokenize_minus_one(path: str) -> None:
    engines.load_llama(path, ()).detokenize([-1])


def test_a_child_that_dies_inside_llama_cpp_names_the_cause_and_keeps_its_output(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Token -1 handed to llama.cpp's detokenizer on bert-bge (30,522 tokens): its vocab throws
    std::out_of_range from `.at()` and the process aborts. The C++ runtime's own words, read from the
    child's output, are the cause (it said only "signal 6" before); ggml's abort handler runs gdb,
    whose backtrace names process ids, and none of it reaches this process's output (a notebook's)."""
    path = str(vocab_path("bert-bge"))
    capfd.readouterr()
    got, err = engines.run_limited(_detokenize_minus_one, (path,), path, limit_s=120)
    said = capfd.readouterr()
    assert got is None and err == (
        "its process ended without an answer (exit -6, signal 6): uncaught std::out_of_range: "
        "vector::_M_range_check: __n (which is 18446744073709551615) >= this->size() (which is 30522)"
    ), err
    assert "gdb" not in said.out + said.err and "Inferior" not in said.out + said.err, said


def test_an_id_outside_the_vocab_is_said_and_never_walked() -> None:
    """lm-format-enforcer's end-of-sequence id is llama.cpp's `token_eos()`, -1 on bert-bge, which
    has none; its forced-literal mask allows it. The walk took it as a token (Python's -1 read the
    last piece), handed it back to lm-format-enforcer, whose decoder passed it to llama.cpp, and the
    process aborted: the row said only its signal. It is said in the row and never walked."""
    v = vocab("bert-bge")
    assert engines.load_llama(str(v.path), ()).token_eos() == -1
    truth = engines.Truth(
        list(v.iter_pieces()),
        set(bridge("bert-bge", "truth").new_matcher(grammars.LEAK_GRAMMAR).allowed()),
        frozenset(v.eog_tokens),
    )
    got, err = engines.run_engine(engines.ENGINES[0], str(v.path), v.overrides, truth)
    assert err == "" and got is not None, err
    row = engines.engine_row("bert-bge", engines.ENGINES[0], "x", got)
    assert row["allowed_outside_vocab"] == "-1" and "error" not in row
    assert got["forced"]["steps"] > 0 and -1 in got["forced"]["outside"]


def test_an_engine_that_raises_in_the_forced_walk_is_an_error_row_not_a_finding(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """lm-format-enforcer's mask raising at the walk's second step (a fault of the library, made
    here by hand) was kept as `forced_error` beside figures, and the page showed the engine's
    finding, a red "spells it: no". It is the row's one-line error, naming the step and the
    cause, with nothing measured; the page shows that line and no verdict of the engine's."""
    from lmformatenforcer import TokenEnforcer

    from llgbridge import nb
    from llgbridge.analyses.engines.section import engines_section

    real = TokenEnforcer.get_allowed_tokens

    def faulty(self: Any, token_sequence: list[int]) -> Any:
        if len(token_sequence) == 1:
            raise RuntimeError("simulated fault in the library")
        return real(self, token_sequence)

    # the engine runs in a forked child, which inherits the patched class
    monkeypatch.setattr(TokenEnforcer, "get_allowed_tokens", faulty)
    v = vocab("gpt-2")
    truth = engines.Truth(
        list(v.iter_pieces()),
        set(bridge("gpt-2", "truth").new_matcher(grammars.LEAK_GRAMMAR).allowed()),
        frozenset(v.eog_tokens),
    )
    payload = engines.run_engines("gpt-2", str(v.path), (), truth, ["lm-format-enforcer"])
    (row,) = payload["rows"]
    assert set(row) == {"vocab", "engine", "version", "error"}, row
    err = row["error"]  # type: ignore[typeddict-item]
    assert err.startswith("the forced walk, step 1: RuntimeError: simulated fault in the library (at test_engines.py:")
    assert "\n" not in err and payload["examples"] == {}
    nb.write_result(str(tmp_path / "results"), "engines", "gpt-2", payload)
    sec = engines_section(tmp_path / "results")
    assert sec is not None
    assert f"Fault: gpt-2: {err}." in sec.text
    shown = sec.views[0].df.iloc[0]
    assert shown["error"].value == err and shown.get("forced: spells it", "") == ""


def test_a_library_not_installed_is_one_line() -> None:
    ghost = engines.Engine("no-such-engine-library", "1.0", "lmfe", "", "")
    assert engines.installed_version(ghost) == "no-such-engine-library not installed"
    # a sidecar engine's versions are its own folder's: llguidance, in the venv, is not counted
    apart = engines.Engine("no-such-engine-library", "1.0", "", "", "", also=(("llguidance", "1.9.1"),), sidecar=True)
    assert engines.installed_version(apart) == "no-such-engine-library not installed, llguidance not installed"


def test_section_names_a_fault_in_one_line(tmp_path: Path) -> None:
    """The page's section: an engine that failed on a vocab is one line naming engine, vocab and
    cause; xgrammar's absence is said with its figure; the table has the engine's version column."""
    from llgbridge import nb
    from llgbridge.analyses.engines.section import engines_section

    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\x00" * 8)
    payload = engines.run_engines("llama-spm", str(bad), (), engines.Truth([b"a"], set(), frozenset()), ["outlines"])
    nb.write_result(str(tmp_path / "results"), "engines", "llama-spm", payload)
    sec = engines_section(tmp_path / "results")
    assert sec is not None
    assert "Fault: llama-spm: ValueError: Failed to load model from file: bad.gguf" in sec.text
    assert str(tmp_path) not in sec.text
    assert "xgrammar** is not run" in sec.text and "2928 MiB" in sec.text
    assert list(sec.raw[0].df.columns[:3]) == ["vocab", "engine", "version"]
    # guidance, which no result ran, is the page's last row, naming its line of code; engines.csv
    # holds no row of a vocab that is none
    last = sec.views[0].df.iloc[-1]
    assert (last["vocab"], last["engine"]) == ("every vocab", "guidance")
    assert last["error"].value == (
        "token table: the sentinel bridge "
        "(guidance/models/_llama_cpp.py:68: llguidance.llamacpp.lltokenizer_from_vocab)"
    )
    assert list(sec.raw[0].df.vocab) == ["llama-spm"]


def test_an_engines_result_records_its_libraries_and_another_version_replans_it(tmp_path: Path) -> None:
    """The engines' libraries are versioned like llguidance (issue 46): a result records each one it
    drove, as installed, and the same result made with another lm-format-enforcer is stale; the other
    analyses' results do not record them (an engine upgrade replans the engines alone)."""
    import json
    from importlib import metadata

    from llgbridge import batch, run
    from llgbridge.results import run_versions

    st = run.execute("engines", "llama-spm", out_root=tmp_path / "reports", results_dir=tmp_path / "results")
    assert st["status"] == "ok", st
    p = tmp_path / "results" / "engines" / "llama-spm.json"
    r = json.loads(p.read_text())
    recorded = r["provenance"]["versions"]
    for pkg in ("lm-format-enforcer", "outlines", "outlines-core"):
        assert recorded[pkg] == metadata.version(pkg), (pkg, recorded)
    assert "lm-format-enforcer" not in run_versions("census")
    assert batch.out_of_date("engines", "llama-spm", tmp_path / "results") == ""
    r["provenance"]["versions"]["lm-format-enforcer"] = "0.10.0"
    p.write_text(json.dumps(r))
    why = batch.out_of_date("engines", "llama-spm", tmp_path / "results")
    assert "it was made with lm-format-enforcer 0.10.0" in why, why
