"""A server error gets its cause from the server's own message and log (`server_causes`).

The real llama-server (the PR's build, llguidance 1.0.1) on the synthetic SentencePiece model,
asked as the suite asks: the chat endpoint's JSON mode answers HTTP 400 "Failed to initialize
samplers: std::exception", and the row names why from the vocab's tokens of the generation prompt
the server logged. A request no rule knows keeps the server's own message.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from llgbridge import generation as G
from llgbridge import synth
from llgbridge.analyses.native import compute as native
from llgbridge.analyses.server import compute as server
from llgbridge.analyses.server import llama_server as S
from llgbridge.analyses.server.causes import cause_of
from llgbridge.vocab import Vocab

_status, _why = S.built()
pytestmark = pytest.mark.skipif(bool(_why), reason=f"servers not built: {_why}")
PIN = native.LLG_PINNED


@pytest.fixture(scope="module")
def spm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[S.Server, Path, Vocab]]:
    path = synth.ensure_model("llama-spm")
    log = tmp_path_factory.mktemp("servers") / "fixed-llama-spm.log"
    with S.serve(S.binary("fixed", PIN), path, log) as srv:
        yield srv, path, Vocab(path, "llama-spm")


def _asked(srv: S.Server, path: Path, v: Vocab, case: str, max_tokens: int) -> server.ServerRow:
    """`case` asked of the fixed build's server as the suite asks it, the plain prompt."""
    run = server.ServerRun(
        srv.binary, path, v, True, PIN, "fixed", [case], {case: G.PLAIN}, srv.log_path, max_tokens, 0, 0.0
    )
    return server.ask(srv, run, case)


def test_the_chat_endpoints_refusal_is_named_from_the_prefill_tokens(spm: tuple[S.Server, Path, Vocab]) -> None:
    srv, path, v = spm
    row = _asked(srv, path, v, server.CHAT_CASE, 16)
    assert (row.http_status, row.error) == (400, "Failed to initialize samplers: std::exception")
    # llama-spm spells the generation prompt ' <', '|', ...: the space prefix merged with '<'
    assert row.cause.startswith("common_sampler_init skipped the first prefill token 529 ' <'"), row.cause
    assert "was fed 29989 '|' first" in row.cause and "throw e;" in row.cause, row.cause


def test_an_answer_is_no_error_and_an_unknown_error_keeps_the_servers_words(
    spm: tuple[S.Server, Path, Vocab],
) -> None:
    srv, path, v = spm
    ok = _asked(srv, path, v, "json_enum", 8)
    assert ok.http_status == 200 and ok.cause == ""
    start = srv.log_size()
    reply = S.post(srv, "/completion", {"prompt": "x", "n_predict": 1, "grammar": "root ::= nowhere"})
    rule, cause = cause_of(reply.status, reply.error, srv.settled_log(start), v)
    assert reply.status >= 400 and rule == "grammar_not_parsed", (reply, cause)
    reply = S.post(srv, "/completion", {"prompt": "x", "n_predict": "many"})
    rule, cause = cause_of(reply.status, reply.error, "", v)
    assert rule == "unclassified" and cause == f"cause not classified: HTTP {reply.status}: {reply.error!r}", cause
