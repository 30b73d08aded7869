"""Notebook parameters: what each notebook declares, and one check for every way in.

`llgbridge.run -p`, `llgbridge.whatif -p` and the notebooks themselves (`nb.check_params`, their
first line) all go through `check`, so a parameter is refused the same way wherever it is given:
an unknown name, a value of another type than the declared default (element types inside lists
included), a number out of its range, or text that cannot be written as UTF-8. Each refusal is
one line naming the parameter.

The declared defaults are read from the notebook's tagged `parameters` cell (its assignments,
evaluated as literals), so the notebook stays the one place they are written.

Standard library only (llguidance's own check of a grammar given as a parameter aside): `run`
checks parameters before any kernel starts.
"""

from __future__ import annotations

import ast
import json
import math
import os
from difflib import get_close_matches
from functools import cache
from pathlib import Path
from typing import Any

from .analyses import BY_NAME
from .errors import InputError
from .inputs import Input
from .overrides import kind_name as _kind
from .paths import ROOT

NOTEBOOK_DIR = ROOT / "notebooks"

# lower bounds: a count below them means nothing (or would silently do nothing)
MINIMUM: dict[str, int | float] = {
    "max_steps": 1,
    "n_inputs": 1,
    "max_tokens": 1,
    "walks": 0,
    "seed": 0,
    "n_examples": 0,
    "temperature": 0,
    "n_gpu_layers": -1,  # -1: llama.cpp's "every layer"
}
# parameters that say what the input is or where output goes, not how it is measured: the main
# report takes a result only when every other parameter has its default (and the input itself
# changes nothing it does not take, `Input.settings`)
NOT_SETTINGS = frozenset({"input", "results_dir", "models_dir", "n_gpu_layers"})


@cache
def _declared(path: Path) -> dict[str, Any]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    cell = next((c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        raise InputError(path, "has no cell tagged `parameters`")
    src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    out: dict[str, Any] = {}
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


def notebook_file(notebook: str, notebooks_dir: Path = NOTEBOOK_DIR) -> Path:
    """`notebook`'s source: in `notebooks_dir`, or where its analysis's entry says when that is the
    repository's folder (an analysis from outside it brings its own, `Analysis.notebook`)."""
    entry = BY_NAME.get(notebook)
    if entry is not None and notebooks_dir == NOTEBOOK_DIR:
        return entry.notebook_path
    return notebooks_dir / f"{notebook}.ipynb"


def declared(notebook: str, notebooks_dir: Path = NOTEBOOK_DIR) -> dict[str, Any]:
    """The parameters `notebook` declares, with their defaults (a fresh copy)."""
    path = notebook_file(notebook, notebooks_dir)
    if not path.exists():
        names = [p.stem for p in sorted(notebooks_dir.glob("*.ipynb"))]
        close = get_close_matches(notebook, names, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise InputError(path, f"no such notebook; {hint}(have: {', '.join(names)})")
    return json.loads(json.dumps(_declared(path)))


def _same_kind(value: Any, default: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    return isinstance(value, type(default))


def _text_problem(s: str) -> str:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"is not valid text ({s[e.start]!a} at character {e.start} cannot be written as UTF-8)"
    if "\0" in s:
        # the C API takes NUL-terminated text (ctypes' c_char_p, the harness's argv): the rest would
        # be measured as if it were not there
        return f"holds a NUL byte at character {s.index(chr(0))}: llguidance's C API would stop reading there"
    return ""


def from_argv(text: str) -> str:
    """A command-line value as the user typed it: under a C locale Python decodes argv as ASCII
    with surrogate escapes, so `héllo` arrives as `h\udcc3\udca9llo`; its bytes are UTF-8 again."""
    if not any("\udc80" <= c <= "\udcff" for c in text):
        return text
    try:
        return os.fsencode(text).decode("utf-8")
    except UnicodeDecodeError:
        return text  # not UTF-8 either: refused later, in one line, as not valid text


def check_value(name: str, value: Any, default: Any) -> None:
    """Refuse `value` for parameter `name` (declared with `default`) in one line."""
    what = f"parameter {name}"
    if not _same_kind(value, default):
        want = "number" if isinstance(default, float) else _kind(default)
        raise InputError(what, f"expected {want}, got {_kind(value)} {value!r:.80}")
    if isinstance(value, str):
        why = _text_problem(value)
        if why:
            raise InputError(what, why)
    if isinstance(value, list):
        item = type(default[0]) if default else None
        for i, x in enumerate(value):
            if item is not None and not isinstance(x, item) or isinstance(x, bool) and item is not bool:
                raise InputError(
                    what, f"element {i} should be {item.__name__ if item else 'a value'}, got {_kind(x)} {x!r:.80}"
                )
            if isinstance(x, str) and _text_problem(x):
                raise InputError(what, f"element {i} {_text_problem(x)}")
    # NaN passed every bound (`nan < 0` is false) and reached llama-server as `"temperature": NaN`,
    # which its JSON parser refuses: a number no JSON parser of the product reads is no parameter
    for i, x in enumerate(value if isinstance(value, list) else [value]):
        if isinstance(x, float) and not math.isfinite(x):
            at = f"element {i} " if isinstance(value, list) else ""
            raise InputError(what, f"{at}must be a finite number (llama.cpp's JSON reads no NaN or Infinity), got {x}")
    low = MINIMUM.get(name)
    if low is not None and isinstance(value, (int, float)) and value < low:
        raise InputError(what, f"must be at least {low}, got {value}")
    if name in GRAMMARS and isinstance(value, str) and (why := grammar_problem(value)):
        raise InputError(what, why)


# the parameters that hold a Lark grammar: llguidance reads them, so llguidance checks them here,
# before a kernel starts (a bad one failed a minute later, inside the notebook)
GRAMMARS = frozenset({"grammar", "leak_grammar"})


def grammar_problem(text: str) -> str:
    """Why llguidance refuses the Lark grammar `text` (its first line), or ""."""
    import llguidance  # only where a grammar is given: planning a run imports no extension

    err = llguidance.LLMatcher.validate_grammar(llguidance.LLMatcher.grammar_from_lark(text))
    if not err:
        return ""
    lines = [ln.strip() for ln in err.strip().splitlines()]
    # its first line may end at "regex parse error:", the cause on a line of its own below
    cause = next((ln for ln in lines[1:] if ln.startswith("error:")), "")
    return f"llguidance rejects it: {lines[0]}{' ' + cause if cause else ''}"


def check(notebook: str, given: dict[str, Any], notebooks_dir: Path = NOTEBOOK_DIR) -> dict[str, Any]:
    """Every parameter of `notebook` as it will run (defaults filled in, the input as `Input.param`
    spells it); InputError for the first given one that is refused."""
    decl = declared(notebook, notebooks_dir)
    for name, value in given.items():
        if name not in decl:
            raise InputError(f"parameter {name}", f"{notebook} has no such parameter (it takes {', '.join(decl)})")
        if name != "input":  # the input is read once, below
            check_value(name, value, decl[name])
    full = {**decl, **given}
    if "input" in full:  # an input's name, or the Input the runner passes
        full["input"] = Input.from_param(full["input"]).param()
    return full


def changed(notebook: str, params: dict[str, Any], notebooks_dir: Path = NOTEBOOK_DIR) -> dict[str, Any]:
    """The settings in `params` that differ from `notebook`'s defaults (inputs and outputs aside),
    and what its input changes that the main report does not take for its name (`Input.settings`:
    the run goes to data/byhand/)."""
    decl = declared(notebook, notebooks_dir)
    out = {k: v for k, v in params.items() if k not in NOT_SETTINGS and k in decl and v != decl[k]}
    if "input" in params:
        out.update(Input.from_param(params["input"]).settings())
    return out


def _no_constant(word: str) -> Any:
    raise ValueError(f"{word} is not JSON")


def parse_value(v: str) -> Any:
    """A `-p` value: JSON when it parses (numbers, lists, quoted strings), else the plain string.
    JSON as llama.cpp's parser reads it: Python's also takes NaN and Infinity, which llama-server
    answers with an HTTP 500 for every request (issue 58, 11), so those stay the text typed (and
    a number parameter refuses it)."""
    v = from_argv(v)
    try:
        return json.loads(v, parse_constant=_no_constant)
    except ValueError:
        return v


def gpu_layers(given: int) -> int:
    """The layers to offload: `given`, or else `make report N_GPU_LAYERS=99`, which reaches the
    pool's matrix and server runs through the environment (a placement, not a setting: their
    results stay in the main report). 0 when neither says, or the variable is not a number."""
    import os

    if given:
        return given
    try:
        return max(-1, int(os.environ.get("N_GPU_LAYERS") or 0))
    except ValueError:
        return 0
