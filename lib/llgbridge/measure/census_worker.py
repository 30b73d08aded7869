"""The Python side of `make bench`'s census comparison, as a process of its own:

    python -m llgbridge.measure.census_worker GGUF...

prints what `bench/census.c` prints: `ready T` once its imports are done (T: CLOCK_MONOTONIC
seconds), then per vocab `name n_tokens differing lost_leading_space seconds load_seconds
free_seconds`. Its start-up is timed against the C program's, so it imports the census and
nothing else: a module apart from `bench`, whose argument parsing, statistics and subprocess
tools are no part of a census.
"""

from __future__ import annotations

import sys
import time


def now() -> float:
    """CLOCK_MONOTONIC seconds: the clock census.c and this worker print `ready` in."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def main(paths: list[str]) -> int:
    from ..analyses.census.compute import run_census  # bench imports `now` from here; only the worker loads the census
    from ..vocab import Vocab  # and llama.cpp

    print(f"ready {now():.6f}")
    for p in paths:
        t0 = now()
        v = Vocab(p)
        t1 = now()
        c = run_census(v)
        t2 = now()
        del v  # frees the llama model, as the C loop does inside its timing
        t3 = now()
        print(f"{c.vocab} {c.n_tokens} {c.differing} {c.lost_leading_space} {t3 - t0:.6f} {t1 - t0:.6f} {t3 - t2:.6f}")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python -m llgbridge.measure.census_worker GGUF...")
    raise SystemExit(main(sys.argv[1:]))
