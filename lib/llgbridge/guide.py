"""The figures the PR review guide reports, transcribed, so the report can set ours beside them.

The guide is the review document that travels with the PR, not part of this repository;
section numbers below are its own. These figures are expectations only: the report and the
tests compare with them, and no computation takes them as input (the grammars the guide
measured with are in `grammars.py`).
"""

from __future__ import annotations

# guide 4.3: vocab -> (differing tokens, of which lost a leading space, n_tokens)
CENSUS: dict[str, tuple[int, int, int]] = {
    "llama-spm": (16410, 16395, 32000),
    "llama-bpe": (117, 117, 128256),
    "gemma-4": (88, 88, 262144),
    "bert-bge": (5, 5, 30522),
}

# guide 4.3 examples: vocab -> (token, piece, detok)
EXAMPLES: dict[str, tuple[int, bytes, bytes]] = {
    "llama-spm": (278, b" the", b"the"),
    "llama-bpe": (5354, b" ..", b".."),
    "gemma-4": (783, b" .", b"."),
    "bert-bge": (1012, b" .", b"."),
}

# guide 4.4 / 7.1: vocab -> allowed tokens with a space at position 0, (without fix, with fix)
LEAK: dict[str, tuple[int, int]] = {
    "llama-bpe": (6, 0),
    "gemma-4": (6, 0),
    "bert-bge": (2, 0),
    "llama-spm": (6136, 0),
}
LEAK_BPE_PIECES: tuple[bytes, ...] = (b" .", b" ..", b" ...", b" ....", b" .....", b" ......")

# guide 7.2: vocab -> (allowed pieces without fix, with fix)
FORCED: dict[str, tuple[tuple[bytes, ...], tuple[bytes, ...]]] = {
    "llama-bpe": ((b"hello",), (b"hello",)),
    "llama-spm": ((b" hello",), (b"h", b"he", b"hel", b"hell", b"hello", b"h")),
}
FORCED_SPM_TOKEN = 22172

# guide 7.1 / 8 (unit level): the PR's test-grammar-llguidance, vocab -> ((exit, bad) without the
# fix, (exit, bad) with it); "bad" is test_no_space_tokens' count
UNIT: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "llama-bpe": ((134, 6), (0, 0)),
    "llama-spm": ((134, 6136), (0, 0)),
}

# guide 8, server level (jf_eval/spm_fix_verify.py: forced literal, json_schema enum, forced skeleton
# around a free region): model -> (tokenizer, without fix, with fix, greedy engaged), and the
# fixture whose tokenizer the suite's synthetic model stands in with (same fixture for the same
# tokenizer; the same type only, for Mistral's own 32k SentencePiece vocab)
SERVER: dict[str, tuple[str, str, str, str]] = {
    "TinyLlama-1.1B Q8_0": ("llama/SPM", "0/3, 3 llg errors", "3/3, 0 errors", "yes"),
    "Mistral-7B-v0.1 Q4_0": ("llama/SPM", "0/3 (silent)", "3/3, 0 errors", "yes"),
    "Hermes-2-Pro-Mistral-7B Q6_K": ("llama/SPM", "0/3 (silent)", "3/3, 0 errors", "yes"),
    "gemma-4-31B-it Q5_K_S": ("gemma4", "3/3", "3/3, 0 errors", "no"),
    "Qwen3.5-2B Q5_K_S": ("bpe/qwen35", "3/3", "3/3, 0 errors", "no"),
}
SERVER_STAND_IN: dict[str, tuple[str, str]] = {  # guide model -> (fixture, how close)
    "TinyLlama-1.1B Q8_0": ("llama-spm", "the same tokenizer"),
    "Mistral-7B-v0.1 Q4_0": ("llama-spm", "the same tokenizer type (SentencePiece, 32k, add_space_prefix)"),
    "Hermes-2-Pro-Mistral-7B Q6_K": ("llama-spm", "the same tokenizer type (SentencePiece, 32k, add_space_prefix)"),
    "gemma-4-31B-it Q5_K_S": ("gemma-4", "the same tokenizer"),
    "Qwen3.5-2B Q5_K_S": ("qwen35", "the same tokenizer"),
}
# the guide's real-weight SentencePiece rows, and the input that stands in for them on real weights: a
# trained model whose tokenizer llama.cpp's own key override gives the space prefix (models.REAL_MODELS)
SERVER_REAL_STAND_IN: dict[str, tuple[str, ...]] = {
    "gemma3-270m+space-prefix": ("TinyLlama-1.1B Q8_0", "Mistral-7B-v0.1 Q4_0", "Hermes-2-Pro-Mistral-7B Q6_K"),
}
# the guide's three server cases, by the names the suite's matrix gives them
SERVER_CASES = ("forced_literal", "json_enum", "half_free")
# guide 8's pre-fix outputs worth quoting (TinyLlama-1.1B), by case: (the quote as the guide prints it, the bug)
QUOTES: dict[str, tuple[str, str]] = {
    "forced_literal": (
        "' The quicker you can do this, the more points you will earn...'",
        "B: the matcher dies, free text",
    ),
    "json_enum": ('\' { "colo ur": "c h artreu se", "count":10 }\'', "A: spurious spaces, a corrupted key"),
    "half_free": ("' BEG IN[iqr] END'", "A"),
}
