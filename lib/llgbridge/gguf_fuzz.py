"""Seeded fuzzing of GGUF loading and bridge construction, each mutant isolated from the caller.

    python -m llgbridge.gguf_fuzz [--n 300] [--seed 0] [--vocab llama-spm] [--timeout 30]
    make gguf-fuzz N=300

Mutates the bytes of a small fixture (bit flips, truncations, length fields set to huge
values, value types overwritten) and feeds each mutant through `Vocab` and the construction
of every bridge in `bridges.COMPARED`, in a worker process. A mutant ends as:

- `ok`: the mutation was harmless (the file still loads and every bridge builds);
- `error`: a clean one-line error that names the input (what a user must get);
- `crash`: the worker died (a signal inside llama.cpp or llguidance), caught by isolation;
- `hang`: no answer within the time limit, the worker killed;
- `unexpected`: an exception that is not one of ours, or a message that is not one line:
  a bug in this suite.

Workers are reused across mutants and restarted after a crash or hang, so a few hundred
mutants take minutes, not a process start each.
"""

from __future__ import annotations

import argparse
import os
import random
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from queue import Empty, Queue
from typing import IO, Any

from gguf import GGUFValueType

from .errors import InputError, LlgError, first_line
from .gguf_meta import _SCALAR
from .paths import vocab_path

# value type -> byte size of a scalar, from the formats the key walk in gguf_meta already uses
_SIZE = {int(t): struct.calcsize(fmt) for t, fmt in _SCALAR.items()}
# what a "type" mutation writes over a value type: the two types with a length after them,
# one past the last type gguf knows, and two more that are no type at all
_TYPES = (max(GGUFValueType) + 1, 255, GGUFValueType.ARRAY, GGUFValueType.STRING, 0xFFFFFFFF)

OUTCOMES = ("ok", "error", "crash", "hang", "unexpected")


@dataclass
class Mutant:
    index: int
    kind: str
    path: Path
    outcome: str = ""
    message: str = ""


def _length_fields(data: bytes) -> list[int]:
    """Offsets of the u64 string-length fields in the key-value section (walked once)."""
    out: list[int] = []
    pos = 24
    try:
        n_kv = struct.unpack_from("<Q", data, 16)[0]
        for _ in range(n_kv):
            out.append(pos)
            pos += 8 + struct.unpack_from("<Q", data, pos)[0]
            t = struct.unpack_from("<I", data, pos)[0]
            pos += 4
            if t == GGUFValueType.STRING:
                out.append(pos)
                pos += 8 + struct.unpack_from("<Q", data, pos)[0]
            elif t == GGUFValueType.ARRAY:
                et, n = struct.unpack_from("<IQ", data, pos)
                pos += 12
                if et == GGUFValueType.STRING:
                    for _ in range(n):
                        out.append(pos)
                        pos += 8 + struct.unpack_from("<Q", data, pos)[0]
                else:
                    pos += n * _SIZE[et]
            else:
                pos += _SIZE[t]
    except (struct.error, KeyError):
        pass
    return out


def mutate(data: bytes, rng: random.Random, lengths: list[int]) -> tuple[str, bytes]:
    kind = rng.choice(["flip", "flip", "truncate", "huge_length", "type"])
    b = bytearray(data)
    if kind == "flip":
        # most of the structure is in the first few kB; flip there more often
        span = len(b) if rng.random() < 0.3 else min(len(b), 4096)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(span)] ^= 1 << rng.randrange(8)
    elif kind == "truncate":
        b = b[: rng.randrange(len(b))]
    elif kind == "huge_length" and lengths:
        off = rng.choice(lengths[:64] + rng.sample(lengths, min(64, len(lengths))))
        b[off : off + 8] = struct.pack("<Q", rng.choice([2**63 - 1, 2**40, 2**32, len(b) * 2, 0xFFFFFFFFFFFFFFFF]))
    else:
        kind = "type"
        off = rng.choice(lengths[:64] or [24])
        n = struct.unpack_from("<Q", b, off)[0] if off + 8 <= len(b) else 0
        tpos = off + 8 + n
        if tpos + 4 <= len(b):
            b[tpos : tpos + 4] = struct.pack("<I", int(rng.choice(_TYPES)))
    return kind, bytes(b)


def make_mutants(src: Path, n: int, seed: int, folder: Path) -> list[Mutant]:
    data = src.read_bytes()
    lengths = _length_fields(data)
    rng = random.Random(seed)
    mutants = []
    for i in range(n):
        kind, b = mutate(data, rng, lengths)
        p = folder / f"mutant-{i:04d}-{kind}.gguf"
        p.write_bytes(b)
        mutants.append(Mutant(i, kind, p))
    return mutants


def check_one(path: Path) -> tuple[str, str]:
    """Load the vocab and build every bridge; (outcome, one-line message)."""
    # only the child that loads the mutants imports llama.cpp: the parent that writes them and
    # reads the child's lines survives the child's crash
    from .bridges import COMPARED, make_bridge
    from .vocab import Vocab

    try:
        v = Vocab(path)
        for name in COMPARED:
            make_bridge(v, name)
    except (InputError, ValueError, LlgError) as e:
        msg = str(e)
        if "\n" in msg.strip() or str(path.name) not in msg:
            return "unexpected", f"{type(e).__name__}: {first_line(msg)} (not one line naming the input)"
        return "error", msg
    except Exception as e:  # noqa: BLE001 - anything else is a bug in the suite
        return "unexpected", f"{type(e).__name__}: {e}"
    return "ok", ""


def _worker(paths: list[str]) -> None:
    for i, p in enumerate(paths):
        print(f"START\t{i}", flush=True)
        outcome, msg = check_one(Path(p))
        print(f"DONE\t{i}\t{outcome}\t{msg.replace(chr(9), ' ').replace(chr(10), ' ')}", flush=True)


def _reader(stream: IO[str], q: Queue[str | None]) -> None:
    for line in stream:
        q.put(line.rstrip("\n"))
    q.put(None)


def run_mutants(mutants: list[Mutant], timeout: float = 30.0, progress: bool = True) -> list[Mutant]:
    """Run every mutant in worker processes, restarting a worker after a crash or a hang."""
    from tqdm import tqdm

    bar = tqdm(total=len(mutants), desc="fuzz", disable=not progress, file=sys.stderr)
    i = 0
    while i < len(mutants):
        rest = mutants[i:]
        listing = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
        listing.write("\n".join(str(c.path) for c in rest))
        listing.close()
        proc = subprocess.Popen(
            [sys.executable, "-m", "llgbridge.gguf_fuzz", "--worker", listing.name],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        q: Queue[str | None] = Queue()
        threading.Thread(target=_reader, args=(proc.stdout, q), daemon=True).start()
        after = _follow(proc, q, rest, timeout, bar)
        i = len(mutants) if after is None else after
        os.unlink(listing.name)
    bar.close()
    return mutants


def _follow(
    proc: subprocess.Popen[str], q: Queue[str | None], rest: list[Mutant], timeout: float, bar: Any
) -> int | None:
    """Each outcome one worker (`proc`, its lines on `q`) says for `rest`, until it ends: the index
    of the mutant after the one it died or hung on (that one charged with it), or None when it got
    through them all."""
    current: int | None = None
    deadline = time.monotonic() + timeout + 30  # the worker's own start-up
    while True:
        try:
            line = q.get(timeout=max(0.1, deadline - time.monotonic()))
        except Empty:
            proc.kill()
            proc.wait()
            c = rest[current if current is not None else 0]
            c.outcome, c.message = "hang", f"{c.path.name}: no answer within {timeout:.0f} s"
            bar.update(1)
            return c.index + 1
        if line is None:  # the worker ended: finished, or died inside native code
            rc = proc.wait()
            if current is None or rest[current].outcome:
                return None
            c = rest[current]
            sig = -rc if rc < 0 else None
            c.outcome = "crash"
            c.message = f"{c.path.name}: worker died " + (f"by signal {sig}" if sig else f"with exit code {rc}")
            bar.update(1)
            return c.index + 1
        parts = line.split("\t")
        if parts[0] == "START":
            current = int(parts[1])
            deadline = time.monotonic() + timeout
        elif parts[0] == "DONE":
            c = rest[int(parts[1])]
            c.outcome, c.message = parts[2], parts[3] if len(parts) > 3 else ""
            bar.update(1)


def fuzz(
    n: int = 300, seed: int = 0, vocab: str = "llama-spm", timeout: float = 30.0, progress: bool = True
) -> list[Mutant]:
    with tempfile.TemporaryDirectory(prefix="llgfuzz") as tmp:
        mutants = make_mutants(vocab_path(vocab), n, seed, Path(tmp))
        return run_mutants(mutants, timeout, progress)


def _count(low: int) -> Any:
    """An argparse type: a whole number of at least `low`, refused in one line otherwise (`N=-5`
    is not 0 runs, and `N='1; echo'` is not a number)."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if n < low:
            raise argparse.ArgumentTypeError(f"{n} is below {low}")
        return n

    return parse


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=_count(1), default=300, help="mutated files (at least 1)")
    ap.add_argument("--seed", type=_count(0), default=0)
    ap.add_argument("--vocab", default="llama-spm")
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        _worker(Path(a.worker).read_text().splitlines())
        return 0
    mutants = fuzz(a.n, a.seed, a.vocab, a.timeout)
    counts = Counter(c.outcome for c in mutants)
    print(
        f"{len(mutants)} mutants from ggml-vocab-{a.vocab}.gguf, seed {a.seed}: "
        + ", ".join(f"{counts.get(o, 0)} {o}" for o in OUTCOMES)
    )
    kinds = Counter((c.kind, c.outcome) for c in mutants)
    for (k, o), m in sorted(kinds.items()):
        print(f"  {k:12} {o:10} {m}")
    for c in mutants:
        if c.outcome in ("crash", "hang", "unexpected"):
            print(f"  {c.outcome}: {c.message}")
    return 1 if counts.get("unexpected") or counts.get("hang") else 0


if __name__ == "__main__":
    raise SystemExit(main())
