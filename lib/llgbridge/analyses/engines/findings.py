"""The engines' findings as the page shows them: each with its reproducer (the library's own
calls, run as `python repro.py VOCAB.gguf`) and its upstream thread. docs/engines.md tells each
one in full and holds the same reproducers (tests/test_engines.py keeps the two the same)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    engine: str
    bugs: str  # their numbers in docs/engines.md
    what: str
    upstream: str
    vocab: str  # the fixture the reproducer is run on
    code: str


FINDINGS: tuple[Finding, ...] = (
    Finding(
        "lm-format-enforcer",
        "1, 2",
        (
            "pieces over 32 bytes and control tokens held as '' and admitted anywhere (bug A's class; an "
            "end token inside a string)"
        ),
        (
            "llama-cpp-python issue #2362 and PR #2363 (open) for the `detokenize` cause; no "
            "lm-format-enforcer issue found"
        ),
        "ggml-vocab-llama-bpe.gguf",
        r"""import sys
from llama_cpp import Llama
from lmformatenforcer import RegexParser, TokenEnforcer
from lmformatenforcer.integrations.llamacpp import build_token_enforcer_tokenizer_data

llm = Llama(sys.argv[1], vocab_only=True, verbose=False)  # ggml-vocab-llama-bpe.gguf
data = build_token_enforcer_tokenizer_data(llm)
text = {t: s for t, s, _ in data.regular_tokens}
print(repr(llm.detokenize([1961])), repr(text[1961]), repr(text[128009]))  # 35 spaces held as ''
allowed = TokenEnforcer(data, RegexParser("[.a-z]{2,6}!")).get_allowed_tokens([]).allowed_tokens
print(1961 in allowed, 128009 in allowed)  # both admitted where the regex forbids them
""",
    ),
    Finding(
        "outlines",
        "4, 5, 8",
        (
            "control tokens held with their text (bug C's class), an end token that is not EOS admitted "
            "inside a string; pieces over 32 bytes dropped"
        ),
        (
            "outlines issue #2041 and PR #2042 (open) for the 32-byte drop; #1819 and PR #1820 (merged) "
            "added the retry; none found for the control tokens"
        ),
        "ggml-vocab-llama-bpe.gguf",
        r"""import sys
import outlines
from llama_cpp import Llama
from outlines.backends.outlines_core import OutlinesCoreBackend
from outlines_core import Guide, Index

llm = Llama(sys.argv[1], vocab_only=True, verbose=False)  # ggml-vocab-llama-bpe.gguf
model = outlines.from_llamacpp(llm)
vocab = OutlinesCoreBackend(model).vocabulary
print(vocab.get("<|eot_id|>"), 1961 in model.tokenizer.vocabulary.values())  # [128009], False
print(128009 in Guide(Index(r"<\|eot_id\|>", vocab)).get_tokens())  # True: a control token as text
""",
    ),
    Finding(
        "lm-format-enforcer",
        "6",
        (
            "its prefix token is the end token tokenize appends, so [1:] cuts each token's first "
            "character (bug B's class, by its own mechanism)"
        ),
        "none found",
        "ggml-vocab-bert-bge.gguf",
        r"""import sys
from llama_cpp import Llama
from lmformatenforcer.integrations.llamacpp import build_token_enforcer_tokenizer_data

llm = Llama(sys.argv[1], vocab_only=True, verbose=False)  # ggml-vocab-bert-bge.gguf
print(llm.tokenize(b"0"), llm.detokenize([102]))  # [101, 1014, 102] b'': the prefix token is [SEP]
text = {t: s for t, s, _ in build_token_enforcer_tokenizer_data(llm).regular_tokens}
print(repr(llm.detokenize([3989])), repr(text[3989]))  # b'ization' 'zation': [1:] cut the 'i'
""",
    ),
    Finding(
        "llama.cpp GBNF",
        "7",
        "a control token admitted where its text is due (bug C's class); end tokens held apart",
        (
            "llama.cpp PR #17816 (merged: `<[id]>` and `<token>` match a token itself; its description "
            "names this ambiguity), PR #22126 (open)"
        ),
        "ggml-vocab-llama-bpe.gguf",
        r"""import ctypes, math, sys
import llama_cpp as L

llm = L.Llama(sys.argv[1], vocab_only=True, verbose=False)  # ggml-vocab-llama-bpe.gguf
vocab = L.llama_model_get_vocab(llm.model)
n = L.llama_vocab_n_tokens(vocab)
def allowed(gbnf):
    s = L.llama_sampler_init_grammar(vocab, gbnf.encode(), b"root")
    cand = (L.llama_token_data * n)(*[L.llama_token_data(i, 0.0, 0.0) for i in range(n)])
    L.llama_sampler_apply(s, ctypes.byref(L.llama_token_data_array(cand, n, -1, False)))
    return [c.id for c in cand if math.isfinite(c.logit)]
print(allowed('root ::= "<|start_header_id|>x"'), allowed('root ::= "<|eot_id|>x"'))  # [27, 128006] [27]
""",
    ),
)


# when the upstream threads' states (open, merged) were read, in stored copies of the GitHub threads
UPSTREAM_READ = "2026-12-07"


def markdown() -> str:
    """The findings as Markdown: a line each, its reproducer under it."""
    parts = []
    for f in FINDINGS:
        parts.append(
            f"**{f.engine}** (docs/engines.md, {f.bugs}): {f.what}. "
            f"Upstream (as read on {UPSTREAM_READ}): {f.upstream}. "
            f"Run on `{f.vocab}`:\n\n```python\n{f.code}```"
        )
    return "\n\n".join(parts)
