"""The one timer of make bench's splits: functions replaced, while inside a block, by ones that time
each call's own seconds, a timed call made inside another counted as its own and taken off the
outer's (llama.cpp's tokenizer called back by llguidance; a harness run inside bug C's rows).

What a split keeps of each call is its own: `on_call` is told the call's key, the key of the timed
call it ran inside (or ""), its own seconds, its arguments and what it returned."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

# (key, the enclosing timed call's key or "", own seconds, args, kwargs, returned or None)
OnCall = Callable[[str, str, float, tuple[Any, ...], dict[str, Any], Any], None]


class SelfTimer:
    """Wraps functions so that each call reports its own seconds to `on_call`."""

    def __init__(self, on_call: OnCall) -> None:
        self.on_call = on_call
        # [key, seconds of the timed calls inside it] for each timed call running now, innermost last
        self._stack: list[list[Any]] = []

    def wrap(self, key: str, f: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*a: Any, **k: Any) -> Any:
            under = self._stack[-1][0] if self._stack else ""
            self._stack.append([key, 0.0])
            got = None
            t0 = time.perf_counter()
            try:
                got = f(*a, **k)
                return got
            finally:
                dt = time.perf_counter() - t0
                inner = self._stack.pop()[1]
                if self._stack:
                    self._stack[-1][1] += dt
                self.on_call(key, under, dt - inner, a, k, got)

        return timed


@contextmanager
def timing(
    timer: SelfTimer, targets: Iterable[tuple[object, str, str]], also: Iterable[tuple[object, str, Any]] = ()
) -> Iterator[None]:
    """Each (object, attribute, key) of `targets` timed by `timer` while inside, and each (object,
    attribute, replacement) of `also` replaced (a split's own timing of a context manager); as they
    were after, also where the block raised."""
    targets, also = list(targets), list(also)
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in (*targets, *also)]
    try:
        for (obj, name, key), (_, _, f) in zip(targets, saved):
            setattr(obj, name, timer.wrap(key, f))
        for obj, name, replacement in also:
            setattr(obj, name, replacement)
        yield
    finally:
        for obj, name, f in saved:
            setattr(obj, name, f)
