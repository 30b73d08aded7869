"""The server analysis in parts (`make bench`, issue 33): `server.run` on a model as the report
runs it (the notebook's defaults: every case on every build, the candidates beside), its wall
split where the calls are made.

- `start`: each build's server from its process start to `/health` answering and the check that
  the server answering is ours (the model's load is most of it);
- `requests`: the HTTP requests, the server's generation inside them (the floor);
- `log`: after each answer, the wait for the server's log to hold that request's lines;
- `judging`: each answer judged from its tokens and checked against the server's `content`;
- `stop`: each server stopped (SIGTERM, its process group);
- `prompts`: llama-cpp-python's load of the model for the prompts' chat template and tokens;
- `other`: the rest (the vocab's load, the rows).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .. import catalogue, llama_server, params, server
from .. import generate as G
from ..analyses.matrix import compute as matrix
from ..candidates import NAMES as CANDIDATES

SERVER_SPLIT_MODELS = ("llama-spm", "smollm2-135m")  # a synthetic model on a 32k vocab, a real one
SERVER_PARTS = (
    ("start", "server starts: process, model load, /health"),
    ("requests", "requests: the server's generation (floor)"),
    ("log", "waits for each request's log lines"),
    ("judging", "judging each answer"),
    ("stop", "server stops"),
    ("prompts", "the prompts' model load (llama-cpp-python)"),
    ("other", "the rest: vocab load, rows"),
)


def server_split(names: tuple[str, ...] = SERVER_SPLIT_MODELS, cases: list[str] | None = None) -> list[dict[str, Any]]:
    """`server.run` per model with the notebook's defaults (or only `cases`), its wall in
    SERVER_PARTS (a row per model: `wall`, `starts`, `requests_n`, each part's seconds); empty
    where no server is built."""
    if llama_server.built()[1]:
        return []
    p = params.declared("server")
    parts: dict[str, float] = {}
    calls: Counter[str] = Counter()

    def timed(part: str, f: Callable[..., Any]) -> Callable[..., Any]:
        def g(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                parts[part] += time.perf_counter() - t0
                calls[part] += 1

        return g

    real_serve = llama_server.serve

    @contextmanager
    def serve(*a: Any, **k: Any) -> Iterator[Any]:
        t0 = time.perf_counter()
        cm = real_serve(*a, **k)
        srv = cm.__enter__()
        parts["start"] += time.perf_counter() - t0
        calls["start"] += 1
        try:
            yield srv
        finally:
            t1 = time.perf_counter()
            cm.__exit__(None, None, None)
            parts["stop"] += time.perf_counter() - t1

    patched = [
        (llama_server, "serve", serve),
        (llama_server, "post", timed("requests", llama_server.post)),
        (llama_server.Server, "settled_log", timed("log", llama_server.Server.settled_log)),
        (server, "answered", timed("judging", server.answered)),
        (G, "load_model", timed("prompts", G.load_model)),
        (server, "prompts_for", timed("prompts", server.prompts_for)),
    ]
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in patched]
    out = []
    try:
        for obj, name, f in patched:
            setattr(obj, name, f)
        for name in names:
            real = catalogue.is_real(name)
            (path,) = matrix.model_paths(name, "", [], p["models_dir"], p["seed"], [])
            parts.clear()
            parts.update(dict.fromkeys((k for k, _ in SERVER_PARTS), 0.0))
            calls.clear()
            t0 = time.perf_counter()
            server.run(
                name,
                path,
                not real,
                catalogue.REAL_MODELS[name].instruct if real else None,
                list(p["cases"]) if cases is None else cases,
                p["prompt"],
                tuple(p["samplers"]),
                p["temperature"],
                p["seed"],
                p["max_tokens"],
                candidates=CANDIDATES if p["with_candidates"] else (),
                say=lambda _line: None,
            )
            wall = time.perf_counter() - t0
            parts["other"] = wall - sum(v for k, v in parts.items() if k != "other")
            counts = {"starts": calls["start"], "requests_n": calls["requests"]}
            out.append({"model": name, "wall": wall, **counts, **parts})
    finally:
        for obj, name, f in saved:
            setattr(obj, name, f)
    return out
