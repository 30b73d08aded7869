"""Helpers the notebooks share: parameter checks, loading, making bridges, writing results."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from . import bridges as B
from . import models, palette
from . import params as P
from .bridges import failed_rows as _failed_rows
from .errors import InputError, cause_line
from .inputs import Input
from .modelfile import ModelFile
from .overrides import Override
from .paths import RESULTS, ROOT, name_problem, resolve, write_json
from .results import BYHAND, DIGEST, digest, provenance, why_unusable
from .show import show, shown_frame
from .vocab import Vocab


def check_param(name: str, value: Any, kind: type | tuple[type, ...]) -> None:
    """A notebook parameter of the wrong type is a one-line error naming it."""
    if not isinstance(value, kind):
        want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise InputError(f"parameter {name}", f"expected {want}, got {type(value).__name__} {value!r}")


def check_params(notebook: str, namespace: dict[str, Any]) -> dict[str, Any]:
    """Every parameter `notebook` declares, taken from `namespace` (the notebook's globals) and
    checked as `llgbridge.run` and `whatif` check them (`params.check`): one line naming the
    first refused. Returns them, for `write_result` to record."""
    given = {k: namespace[k] for k in P.declared(notebook) if k in namespace}
    return P.check(notebook, given)


def the_input(params: dict[str, Any]) -> Input:
    """The input the checked `params` name (`check_params` spelled it as `Input.param`)."""
    return Input.from_param(params["input"])


def load_vocab(it: Input, needs_text: bool = True) -> Vocab:
    """The input's vocab, loaded once per kernel with every key override its loads take
    (`Input.load_overrides`); InputError in one line for a vocab on which no token has text
    (`Vocab.require_text`), unless the analysis does not `needs_text` (the census: it measures the
    two conversions, which such a vocab has too)."""
    if it.real:  # not fetched: say which package failed and why, not "no such file"
        models.model_path(it.name)
    v = cached_vocab(it.path, it.name, it.load_overrides())
    if needs_text:
        v.require_text()
    return v


def cached_vocab(file: Path | ModelFile, name: str, overrides: Iterable[Override]) -> Vocab:
    """`Vocab(file, name, kv)` loaded once per kernel, and the bridges `bridge` builds on it kept
    with it: a kernel that runs several analyses of one input (run.execute_batch) loads it once, the
    real model's matrix and server included. The key holds the file's size and date, so a changed
    file is loaded again, and the overrides, so the same file without them is another vocab. A model
    file given as its value (`modelfile.ModelFile`) is not read again to be checked."""
    p = file.path if isinstance(file, ModelFile) else file
    kv = tuple(overrides)
    st = p.stat() if p.exists() else None
    key = (str(p.resolve()), name, st.st_size if st else -1, st.st_mtime_ns if st else -1, tuple(kv))
    if key not in _VOCABS:
        _VOCABS.clear()  # one vocab at a time: a batch never comes back to an earlier one
        B.keep(None)
        t0 = time.perf_counter()
        _VOCABS[key] = Vocab(file, name=name, overrides=kv)
        TIMES["load"] += time.perf_counter() - t0
        B.keep(_VOCABS[key])
    return _VOCABS[key]


# seconds this kernel spent loading vocabs since the runner last asked (`take_times`): the report's
# benchmark counts a load as overhead, not as the analysis's own compute
TIMES: dict[str, float] = {"load": 0.0}


def take_times() -> dict[str, float]:
    got = dict(TIMES)
    for k in TIMES:
        TIMES[k] = 0.0
    return got


def between_notebooks() -> None:
    """What the runner (`run.Worker`) runs in its kernel after each notebook: prints `take_times`
    as JSON, then drops every name the notebook made, as `%reset -f` does, less the full garbage
    collection IPython's reset runs (0.05-0.2 s a notebook with a large vocab loaded, measured
    here, against 0.3 ms for the rest); Python's own collector still runs as it always does."""
    import gc
    import json

    from IPython import get_ipython

    print(json.dumps(take_times()))
    ip = get_ipython()
    if ip is None:
        return
    collect = gc.collect
    gc.collect = lambda *a, **k: 0
    try:
        ip.reset(new_session=False)
    finally:
        gc.collect = collect


_VOCABS: dict[tuple[str, str, int, int, tuple[Override, ...]], Vocab] = {}


def bridge(v: Vocab, name: str) -> Any:
    """`bridges.make_bridge(v, name)`, built once per kernel for a vocab that `load_vocab` cached
    (`bridges.shared`, which keeps them beside the judge that reads them too)."""
    return B.shared(v, name)


def result_path(results_dir: str, analysis: str, vocab: str) -> Path:
    why = name_problem(vocab)
    if why:  # the name becomes a file name: `../x` would write outside the results
        raise InputError("parameter vocab", why)
    return resolve(results_dir) / analysis / f"{vocab}.json"


def write_result(
    results_dir: str, analysis: str, vocab: str, payload: dict[str, Any], params: dict[str, Any] | None = None
) -> Path:
    """The tidy result of one (analysis, vocab) run; `status: ok` marks it complete. Returns
    where it went.

    It is checked against `results.SCHEMAS` first, so a notebook cannot write what the report
    would refuse to read, and records what produced it (`results.provenance`: the input's
    sha256, the parameters, the code version). A run with other settings than the defaults
    never lands in the main results, whatever `results_dir` says: it goes to `data/byhand/`.
    """
    record = {"status": "ok", "notebook": analysis, "vocab": vocab, **payload}
    why = why_unusable(analysis, vocab, record)
    if why:
        raise InputError(f"{analysis} result for {vocab}", f"does not match its schema: {why}")
    if params is not None:
        record["provenance"] = provenance(analysis, params, vocab)
    record[DIGEST] = digest(record)
    out = result_path(results_dir, analysis, vocab)
    changed = P.changed(analysis, params) if params is not None else {}
    if changed and out.parent.parent.resolve() == RESULTS.resolve():
        out = BYHAND / analysis / out.name
        print(
            f"{analysis}: non-default parameters ({', '.join(changed)}), so the result goes to "
            f"{out.relative_to(ROOT)}, not into the main report"
        )
    try:
        write_json(out, record)
    except OSError as e:  # a full disk or a read-only folder: one line naming the path
        raise InputError(out, e.strerror or str(e)) from None
    return out


def show_bytes(b: bytes) -> str:
    """A piece as a reviewer reads it (`show.show`): quoted, spaces and invalid bytes visible."""
    return show(b)


def make_bridges(v: Vocab, names: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """(built bridges by name, build errors by name): a bridge that cannot be built for a vocab
    is a result (its one-line reason), not a crash of the notebook."""
    check_param("bridges", names, list)
    # an unknown name is the caller's error, not a bridge that cannot be built: checked first
    for name in names:
        B.bridge_class(name)
    built, errors = {}, {}
    for name in names:
        try:
            built[name] = bridge(v, name)
        except InputError as e:
            # llguidance's panics come with a backtrace: a result keeps the line that says why
            errors[name] = cause_line(e.cause)
    return built, errors


def failed_rows(vocab: str, errors: dict[str, str]) -> list[dict[str, Any]]:
    return _failed_rows(vocab, errors)


def table(rows: list[dict[str, Any]]) -> Any:
    """Rows as a DataFrame for display, byte-like columns quoted so a space or a newline shows."""
    import pandas as pd

    return shown_frame(pd.DataFrame(rows))


def hbars(ax: Any, labels: list[str], series: dict[str, list[int]], colors: dict[str, str] | None = None) -> None:
    """Grouped horizontal bars with every value written at its bar's end, a zero included, and
    the legend outside the bars (it must not hide the only bar)."""
    n = max(1, len(series))
    h = 0.8 / n
    top = max([1] + [v for vals in series.values() for v in vals])
    for j, (name, vals) in enumerate(series.items()):
        ys = [i - 0.4 + h / 2 + j * h for i in range(len(labels))]
        ax.barh(ys, vals, height=h, label=name, color=(colors or palette.BRIDGES).get(name))
        for y, x in zip(ys, vals):
            ax.text(x, y, f" {x}", va="center", fontsize=9)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlim(0, top * 1.18)
    if len(series) > 1:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
