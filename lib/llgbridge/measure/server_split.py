"""The server analysis in parts (`make bench`, issue 33): `server.run` on a model as the report
runs it (the notebook's defaults: every case on every build, the candidates beside), its wall
split where the calls are made.

- `start`: each build's server from its process start to `/health` answering and the check that
  the server answering is ours (the model's load is most of it; llama-server's work, so the floor);
- `requests`: the HTTP requests, the server's generation inside them (the floor);
- `log`: after each answer, the wait for the server's log to hold that request's lines;
- `judging`: each answer judged from its tokens and checked against the server's `content`;
- `stop`: each server stopped (SIGTERM, its process group);
- `prompts`: each case's prompt, rendered from the model's header and vocab (no weights loaded);
- `other`: the rest (the vocab's load, the rows).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any

from .. import catalogue, params
from ..analyses.matrix import compute as matrix
from ..analyses.server import compute as server
from ..analyses.server import llama_server
from ..candidates import NAMES as CANDIDATE_NAMES
from ..inputs import Input
from .benchmd import BenchPart, csv_row, table
from .calls import SelfTimer
from .calls import timing as timed_calls

SERVER_SPLIT_MODELS = ("llama-spm", "smollm2-135m")  # a synthetic model on a 32k vocab, a real one
SERVER_PARTS = (
    ("start", "server starts: process, model load, /health (floor)"),
    ("requests", "requests: the server's generation (floor)"),
    ("log", "waits for each request's log lines"),
    ("judging", "judging each answer"),
    ("stop", "server stops"),
    ("prompts", "the prompts, rendered from the header"),
    ("other", "the rest: vocab load, rows"),
)


@dataclass
class Clock:
    """Seconds and calls per SERVER_PARTS part, of one model's `server.run`."""

    parts: dict[str, float] = field(default_factory=dict)
    calls: Counter[str] = field(default_factory=Counter)

    def reset(self) -> None:
        self.parts.clear()
        self.parts.update(dict.fromkeys((k for k, _ in SERVER_PARTS), 0.0))
        self.calls.clear()

    def __post_init__(self) -> None:
        self.timer = SelfTimer(self._add)  # the one timer: a call's own seconds

    def _add(self, part: str, _under: str, own: float, *_: Any) -> None:
        self.parts[part] += own
        self.calls[part] += 1

    def timed(self, part: str, f: Callable[..., Any]) -> Callable[..., Any]:
        return self.timer.wrap(part, f)

    def serving(self, real_serve: Callable[..., Any]) -> Callable[..., Any]:
        """`llama_server.serve` with its start (to the server answering) and its stop timed apart."""

        @contextmanager
        def serve(*a: Any, **k: Any) -> Iterator[Any]:
            t0 = time.perf_counter()
            cm = real_serve(*a, **k)
            srv = cm.__enter__()
            self.parts["start"] += time.perf_counter() - t0
            self.calls["start"] += 1
            try:
                yield srv
            finally:
                t1 = time.perf_counter()
                cm.__exit__(None, None, None)
                self.parts["stop"] += time.perf_counter() - t1

        return serve


def timing(clock: Clock) -> AbstractContextManager[None]:
    """The calls `server.run` makes timed into `clock` while inside, as they were after."""
    return timed_calls(
        clock.timer,
        [
            (llama_server, "post", "requests"),
            (llama_server.Server, "settled_log", "log"),
            (server, "answered", "judging"),
            (server, "_prompts", "prompts"),
        ],
        also=[(llama_server, "serve", clock.serving(llama_server.serve))],
    )


def split_one(name: str, p: dict[str, Any], cases: list[str] | None, clock: Clock) -> dict[str, Any]:
    """`server.run` on the model `name` with the notebook's parameters `p` (or only `cases`), timed into `clock`."""
    real = catalogue.is_real(name)
    (model,) = matrix.model_files(Input.make(name), p["models_dir"], p["seed"])
    clock.reset()
    t0 = time.perf_counter()
    server.run(
        name,
        model,
        not real,
        catalogue.REAL_MODELS[name].instruct if real else None,
        list(p["cases"]) if cases is None else cases,
        server.RunOptions(
            p["prompt"],
            tuple(p["samplers"]),
            p["temperature"],
            p["seed"],
            p["max_tokens"],
            candidates=CANDIDATE_NAMES if p["with_candidates"] else (),
        ),
        say=lambda _line: None,
    )
    wall = time.perf_counter() - t0
    parts = clock.parts
    parts["other"] = wall - sum(v for k, v in parts.items() if k != "other")
    counts = {"starts": clock.calls["start"], "requests_n": clock.calls["requests"]}
    return {"model": name, "wall": wall, **counts, **parts}


def server_split(names: tuple[str, ...] = SERVER_SPLIT_MODELS, cases: list[str] | None = None) -> list[dict[str, Any]]:
    """`server.run` per model with the notebook's defaults (or only `cases`), its wall in
    SERVER_PARTS (a row per model: `wall`, `starts`, `requests_n`, each part's seconds); empty
    where no server is built."""
    if llama_server.built()[1]:
        return []
    p = params.declared("server")
    clock = Clock()
    with timing(clock):
        return [split_one(name, p, cases, clock) for name in names]


def server_split_table(rows: list[dict[str, Any]]) -> Any:
    """SERVER_PARTS down, the models across: seconds and share of each model's wall."""
    return table(
        ["part", *(r["model"] for r in rows)],
        [
            [
                "wall s (server starts, requests)",
                *(f"{r['wall']:.1f} ({r['starts']}, {r['requests_n']})" for r in rows),
            ],
            *[[label, *(f"{r[k]:.2f} ({100 * r[k] / r['wall']:.0f}%)" for r in rows)] for k, label in SERVER_PARTS],
        ],
    )


@dataclass(frozen=True)
class ServerSplit(BenchPart):
    """`server_split`'s rows, one per model; none where no server is built."""

    splits: list[dict[str, Any]]

    def rows(self) -> list[dict[str, object]]:
        out = []
        for r in self.splits:
            out.append(csv_row("server_part", r["model"], r["requests_n"], "wall", r["wall"]))
            for k, _ in SERVER_PARTS:
                out.append(csv_row("server_part", r["model"], r["requests_n"], k, r[k], r[k] / r["wall"]))
        return out

    def context(self) -> dict[str, Any]:
        return {"server_split": {"table": server_split_table(self.splits)} if self.splits else None}
