"""Objects the server's load test uses from several threads share nothing mutable.

`server.load` judges concurrent answers on a thread pool that shares one `Vocab`. When `Vocab`
kept one piece buffer per object, a thread could copy another thread's piece out of it between
llama.cpp's write and its own copy: `real_bytes` came back with one byte of another piece, and
the suite published those corrupted judgements as "the fixed build breaks its grammar under load".

Each test here calls one function from 8 threads on many inputs and compares every answer with
the same call made serially. Python's switch interval is forced down meanwhile, so that a thread
is interrupted between any two bytecodes, as a loaded machine interrupts it now and then: on the
shared-buffer code the first test fails on every run (a few hundred of 3,200 answers differ).
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from conftest import vocab

from llgbridge import cases as C
from llgbridge import generation as G
from llgbridge import judge as J
from llgbridge.analyses.server import cases as server_cases
from llgbridge.analyses.server import judge as server_judge

T = TypeVar("T")
THREADS = 8


@contextmanager
def _switch_often() -> Iterator[None]:
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def _differ(fn: Callable[[Any], T], inputs: Sequence[Any], rounds: int = 4) -> list[int]:
    """The indexes of `inputs` whose answer from 8 threads is not the serial one."""
    serial = [fn(x) for x in inputs]
    bad: set[int] = set()
    with _switch_often(), ThreadPoolExecutor(max_workers=THREADS) as pool:
        for _ in range(rounds):
            got = list(pool.map(fn, inputs))
            bad |= {i for i, (a, b) in enumerate(zip(serial, got, strict=True)) if a != b}
    return sorted(bad)


def _sequences(n_tokens: int, count: int, length: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(n_tokens) for _ in range(length)] for _ in range(count)]


@pytest.mark.parametrize("name", ["llama-spm", "llama-bpe"])
def test_real_bytes_from_threads_is_the_serial_answer(name: str) -> None:
    v = vocab(name)
    seqs = _sequences(v.n_tokens, 800, 64)
    assert _differ(v.real_bytes, seqs) == []


def test_detokenize_from_threads_is_the_serial_answer() -> None:
    """One token at a time, as the upstream bridge's table is built (its own one-token buffer)."""
    v = vocab("llama-spm")
    tokens = [[t] for t in random.Random(1).sample(range(v.n_tokens), 6000)]
    assert _differ(lambda t: v.detokenize(t), tokens) == []


def test_token_to_piece_from_threads_is_the_serial_answer() -> None:
    v = vocab("gemma-4")
    tokens = random.Random(2).sample(range(v.n_tokens), 3000)
    assert _differ(lambda t: (v.token_to_piece(t), v.token_to_piece(t, 1, True)), tokens) == []


def test_the_server_judge_from_threads_is_the_serial_answer() -> None:
    """What `server.load`'s threads run on each answer: the judged text (`judge_tokens`, which
    decodes, finds the first violation with the truth bridge's matcher and applies the case's
    check), on every case the load test sends."""
    v = vocab("llama-spm")
    cases = ["forced_literal", "half_free", "dots", "json_enum", server_cases.GBNF_CASE]
    hello = v.tokenize(b"hello world", parse_special=False)
    answers = [
        (cases[i % len(cases)], toks) for i, toks in enumerate(_sequences(v.n_tokens, 150, 24, seed=3) + [hello] * 10)
    ]

    asks = server_cases.asks_for(cases, {c: G.PLAIN for c in cases}, 64, 0, 0.0, v)

    def judged(a: tuple[str, list[int]]) -> tuple[Any, ...]:
        case, toks = a
        j = server_judge.judge_tokens(v, asks[case], toks, "limit")
        return (j.outcome, j.shown, j.first_violation, j.output)

    assert _differ(judged, answers, rounds=1) == []


def test_first_violation_from_threads_is_the_serial_answer() -> None:
    """The truth bridge is built once and shared; each call walks a matcher of its own."""
    v = vocab("llama-bpe")
    grammar = C.CASES["half_free"].grammar
    legal = v.tokenize(b"BEGIN[abc] END", parse_special=False)
    seqs = (
        [legal] * 20
        + _sequences(v.n_tokens, 60, 12, seed=4)
        + [legal[:k] + [t] for k in range(len(legal)) for t in (220, 13)]
    )
    assert _differ(lambda s: J.first_violation(v, grammar, s), seqs, rounds=1) == []


def test_the_servers_log_shows_a_line_only_once_its_file_has_it(tmp_path: Path) -> None:
    """`llama_server.ServerLog`'s reader thread keeps a server's output for the rows and copies it
    to the log file; the rows read it from the main thread. It once kept a chunk before copying
    it, so a row could read a line whose copy then failed (a full disk), and record it as if it
    were written: which rows failed depended on the threads' timing, and CI saw the other words.
    A FIFO that nobody drains stands for a file whose write has not finished: of 192 KiB sent,
    the log shows only what the FIFO took; once drained, all of it, the file holding the same."""
    import os
    import threading
    import time

    from llgbridge.analyses.server.llama_server import ServerLog

    fifo = tmp_path / "log"
    os.mkfifo(fifo)
    drain = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # so the log's open for writing does not wait
    r, w = os.pipe()
    sent = bytes(random.Random(0).randrange(256) for _ in range(192 * 1024))
    with os.fdopen(r, "rb", buffering=0) as stream:
        log = ServerLog(stream, fifo)
        writer = threading.Thread(target=lambda: (os.write(w, sent), os.close(w)), daemon=True)
        writer.start()
        deadline = time.monotonic() + 10
        while not log.size() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.5)  # for the reader to read on and sit in a write the FIFO cannot take
        capacity = 1 << 16  # a Linux pipe's
        assert 0 < log.size() <= capacity, log.size()
        got = bytearray()
        while len(got) < len(sent) and time.monotonic() < deadline:
            try:
                got += os.read(drain, 1 << 16)
            except BlockingIOError:
                time.sleep(0.01)
        log.finish()
        os.close(drain)
    assert bytes(got) == sent and log.size() == len(sent)
