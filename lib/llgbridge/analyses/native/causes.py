"""Why llama.cpp's own test exited non-zero on a vocab, named from what the test and the sampler did.

A `TestRun` holds the evidence (`logs.run_test`): which assertion failed, the counts the PR's two
tests print, the first string test that failed, the first error the sampler logged before it
dropped its grammar, and the last token `test_sampler_chain` applied with what the chain
selected. `classify` reads it with the vocab at hand (what a token is, how `common_tokenize`
spells a string there) and names the cause in one sentence, by the first rule of `RULES` that
applies. Where none does, the cause is "cause not classified" with the evidence (the assertion
line, else the failure, else how the process ended): a vocab no rule foresaw still says what
happened, never nothing.

The assertions are recognised by their expression, not their line: the shipped test and the PR's
put the same `assert` on different lines.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import llama_cpp

from ...show import show
from .logs import TestRun

# rule -> what it recognises (the report lists each with the vocabs it named)
RULES: dict[str, str] = {
    "space_tokens": "test_no_space_tokens: the mask at position 0 allows tokens whose real piece has a space (bug A)",
    "forced_not_prefix": "test_forced_mask_bytes: the forced literal's mask allows a token that is no prefix "
    "of it (bug B)",
    "llg_limit": "a string test failed after the sampler hit one of llguidance's limits and dropped its "
    "grammar (bug D)",
    "string_not_spelled": "a string test failed on a string common_tokenize cannot spell byte for byte on this "
    "vocab (guide 7.3)",
    "llg_dropped": "a string test failed after the sampler dropped its grammar on a llguidance error",
    "eos_is_text": "a string test 'incorrectly matched': the end token the test gives the sampler is a text token "
    'the grammar admits at that point (RWKV\'s EOT 261 is "\\n\\n")',
    "no_eos": "test_sampler_chain indexes cur[tok_eos] with tok_eos = -1: the vocab has neither EOT nor EOS",
    "eos_not_selected": "test_sampler_chain: the chain did not select tok_eos at the end of its input",
    "chain_token_refused": "test_sampler_chain: the chain did not select a token of its own input",
    "no_sampler": "llama_sampler_init_llg returned no sampler for the test's grammar",
    "unclassified": "cause not classified: the evidence is given as the test left it",
}

# llguidance's limit errors (parser/src/earley/parser.rs and its lexer), by the field of
# LlgParserLimits that sets each
_LIMITS = (
    (re.compile(r"Too many items \(limit (\d+)"), "step_max_items"),
    (re.compile(r"lexer fuel|fuel exhausted", re.I), "step_lexer_fuel"),
    (re.compile(r"Too many lexer states|max_lexer_states", re.I), "max_lexer_states"),
    (re.compile(r"max_items_in_row|Too many items in a row", re.I), "max_items_in_row"),
    (re.compile(r"grammar too large|max_grammar_size", re.I), "max_grammar_size"),
)
_CHAIN_INPUT = "ALL YOUR BASE ARE BELONG TO US"  # test_sampler_chain's input, its grammar /[A-Z ]*/
_CHAIN_ALLOWED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ ")
_ATTRS = {n: int(getattr(llama_cpp, n)) for n in dir(llama_cpp) if n.startswith("LLAMA_TOKEN_ATTR_")}
_CONTROL = int(llama_cpp.LLAMA_TOKEN_ATTR_CONTROL)


def _piece(vocab: Any, token: int) -> str:
    try:
        return show(vocab.token_to_piece(token, special=True))
    except Exception:  # noqa: BLE001 - a token outside the vocab is evidence too
        return "(no such token)"


def _attr(vocab: Any, token: int) -> int:
    return int(llama_cpp.llama_vocab_get_attr(vocab.llama_vocab, token))


def _attr_names(attr: int) -> str:
    """llama_token_attr's flags by their names in llama.h (`LLAMA_TOKEN_ATTR_NORMAL` -> NORMAL)."""
    names = [n.removeprefix("LLAMA_TOKEN_ATTR_") for n, v in _ATTRS.items() if v and attr & v]
    return " | ".join(names) or "UNDEFINED"


def _failed_string(failure: str) -> str | None:
    m = re.match(r'"((?:[^"\\]|\\.)*)" (failed to match|incorrectly matched)', failure)
    return m[1] if m else None


def _limit(error: str) -> str:
    for pat, name in _LIMITS:
        if m := pat.search(error):
            return f"{name} ({m[1]})" if m.groups() else name
    return ""


def classify(run: TestRun, vocab: Any, tok_eos: int) -> tuple[str, str]:
    """(rule, cause) for a run that exited non-zero; ("", "") for one that passed."""
    if run.exit_code == 0:
        return "", ""
    a, fail, err = run.assertion, run.failure, run.llg_error
    if "bad_space == 0" in a:
        return (
            "space_tokens",
            f"test_no_space_tokens: {run.space_bad} of {run.space_allowed} allowed tokens have a space in their piece "
            f"(bug A)",
        )
    if "bad_forced == 0" in a:
        return "forced_not_prefix", (
            f"test_forced_mask_bytes: {run.forced_bad} of {run.forced_allowed} allowed tokens are no prefix of the "
            f"literal (bug B)"
        )
    string = _failed_string(fail)
    if string is not None and (found := _string_cause(run, vocab, tok_eos, string)):
        return found
    if "tok_eos" in a and tok_eos < 0:
        return "no_eos", "tok_eos = -1 (no EOT, no EOS): test_sampler_chain reads cur[-1]"
    if "tok_eos" in a:
        return "eos_not_selected", (
            f"test_sampler_chain: the chain did not select tok_eos {tok_eos} ({_piece(vocab, tok_eos)}) at the end"
            + (f"; llg error: {err[:80]}" if err else "")
        )
    if "== token" in a and run.chain_token is not None:
        return _chain_cause(run, vocab, run.chain_token)
    if "grammar != nullptr" in a:
        return "no_sampler", "llama_sampler_init_llg returned no sampler for the test's grammar" + (
            f" (llg error: {err[:80]})" if err else ""
        )
    evidence = a or fail or f"exit {run.exit_code}"
    return "unclassified", f"cause not classified: {evidence}" + (
        f"; llg error: {err[:80]}" if err and err not in evidence else ""
    )


def _string_cause(run: TestRun, vocab: Any, tok_eos: int, string: str) -> tuple[str, str] | None:
    """(rule, cause) for a string test that failed on `string`, or None when none of its rules holds."""
    fail, err = run.failure, run.llg_error
    where = fail.split(" in ", 1)[-1] if " in '" in fail else "a string test"
    limit = _limit(err)
    if limit:
        return "llg_limit", (
            f"llguidance's {limit} limit: the sampler dropped its grammar in {where}, so "
            f"{'an invalid' if 'incorrectly' in fail else 'a valid'} string was "
            f"{'accepted' if 'incorrectly' in fail else 'refused'} ({fail.split(' in ')[0]})"
        )
    tokens = vocab.tokenize(string.encode(), add_special=False, parse_special=False)
    spelled = vocab.real_bytes(tokens)
    if spelled != string.encode():
        return "string_not_spelled", (
            f"common_tokenize spells {show(string.encode())} as {show(spelled)} on this vocab, so the test cannot "
            f"express it ({fail})"
        )
    if err:
        return "llg_dropped", f"the sampler dropped its grammar on a llguidance error ({err[:80]}), then {fail}"
    if "incorrectly" in fail and tok_eos >= 0 and not _attr(vocab, tok_eos) & _CONTROL:
        return "eos_is_text", (
            f"tok_eos {tok_eos} {_piece(vocab, tok_eos)} is a text token ({_attr_names(_attr(vocab, tok_eos))}) "
            f"the grammar admits after {show(string.encode())}: the sampler allowed it, so the test's "
            f"`cur[tok_eos].logit >= 0` read the incomplete string as matched ({fail})"
        )
    return None


def _chain_cause(run: TestRun, vocab: Any, t: int) -> tuple[str, str]:
    """(rule, cause) for test_sampler_chain refusing token `t` of its input."""
    err = run.llg_error
    piece = vocab.token_to_piece(t)
    inside = bool(piece) and set(piece) <= _CHAIN_ALLOWED
    sel = "" if run.chain_selected is None else f", selected {run.chain_selected} ({_piece(vocab, run.chain_selected)})"
    return "chain_token_refused", (
        f"test_sampler_chain: token {t} ({_piece(vocab, t)}) of common_tokenize({_CHAIN_INPUT!r}) was not "
        f"selected{sel}; its piece is {'inside' if inside else 'outside'} the grammar /[A-Z ]*/"
        + (f"; llg error: {err[:80]}" if err else "")
    )


def classified(run: TestRun, vocab: Any, tok_eos: int) -> TestRun:
    """`run` with its cause and rule filled in."""
    rule, cause = classify(run, vocab, tok_eos)
    return dataclasses.replace(run, rule=rule, cause=cause)


__all__ = ["RULES", "classified", "classify"]
