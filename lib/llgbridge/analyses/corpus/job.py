"""The corpus's jobs: what a worker runs for one (schema, vocab) and one (schema, vocab, bridge),
and the key each record is cached under (`code_hash`). `corpus` plans them, runs them and sums
their records into tables; only this module (and what it imports) decides a record's bytes, so it
alone is hashed into the cache key.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import asdict, dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ... import soundness
from ...bridges import Bridge
from ...errors import InputError, LlgError, first_line
from ...grammars import json_grammar
from ...llg import mask_bits, timed
from ...paths import resolve
from ...results import import_closure

ERROR_CHARS = 300  # an llguidance error can list every unsupported key: cut, still one line
_CLOSERS = frozenset(b'"]}')
_SPACE = frozenset(b" \t\r\n")


@dataclass(frozen=True)
class Params:
    instances: int = 3  # valid strings per (schema, vocab)
    max_tokens: int = 96  # the longest instance, in tokens
    steer_after: int = 32  # tokens before the walk steers toward the end
    seed: int = 0


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=True).encode()).hexdigest()


@cache
def code_hash() -> str:
    """What a job's record depends on: this module and every llgbridge module it reaches
    (`results.import_closure`, the same closure that checks each analysis's code version), by
    their bytes, and the two native libraries' versions. The tables, the CLI and the runner
    (`corpus`) are not on the job path, so editing how results are summed keeps the cache."""
    from importlib import metadata

    here = Path(__file__)
    lib = here.parents[2]  # lib/llgbridge: the package, from analyses/corpus/
    parts = {
        str(f.relative_to(lib)): hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(import_closure([here]))
    }
    parts["llguidance"] = metadata.version("llguidance")
    parts["llama-cpp-python"] = metadata.version("llama-cpp-python")
    return _sha(parts)


@dataclass(frozen=True)
class InstancesJob:
    schema: str  # the wheel's file id
    schema_path: str
    schema_digest: str  # sha256 of the file's bytes when planned (not the manifest's: a file may be edited)
    vocab: str
    vocab_path: str
    vocab_digest: str
    params: Params

    @property
    def key(self) -> str:
        # the names too, not only the contents: the wheel has schemas with identical bytes under
        # different names, and a record carries its names into the tables
        return _sha(
            {
                "kind": "instances",
                "schema": [self.schema, self.schema_digest],
                "vocab": [self.vocab, self.vocab_digest],
                "params": asdict(self.params),
                "code": code_hash(),
            }
        )


@dataclass(frozen=True)
class BridgeJob:
    inst: InstancesJob
    bridge: str
    instances: tuple[str, ...]

    @property
    def key(self) -> str:
        return _sha({"kind": "bridge", "instances_key": self.inst.key, "bridge": self.bridge})


# -- per worker process: vocabs and bridges, built once ---------------------------------------------
@lru_cache(maxsize=2)
def _vocab(path: str, name: str) -> Any:
    from ...vocab import Vocab  # loaded by the worker that runs the job; the planner only keys jobs

    return Vocab(resolve(path), name=name)


@lru_cache(maxsize=8)
def _bridge(path: str, name: str, bridge: str) -> tuple[Bridge | None, str]:
    """(bridge, "") or (None, why it cannot be built): a failure is cached too, not retried per job."""
    from ...bridges import make_bridge  # likewise: only a worker builds bridges

    try:
        return make_bridge(_vocab(path, name), bridge), ""
    except InputError as e:
        return None, e.cause


@lru_cache(maxsize=2)
def _classes(path: str, name: str) -> tuple[list[bytes], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per token of the vocab: its real piece, and whether it closes (only `"]}` and spaces),
    is one non-space byte, is only whitespace, or may be chosen at all (not EOS/EOT)."""
    v = _vocab(path, name)
    pieces = list(v.iter_pieces())
    closer = np.array([bool(p.strip()) and set(p.strip()) <= _CLOSERS for p in pieces])
    single = np.array([len(p) == 1 and p[0] not in _SPACE for p in pieces])
    space = np.array([bool(p) and set(p) <= _SPACE for p in pieces])
    keep = np.ones(v.n_tokens, dtype=bool)
    for t in (v.eos, v.eot):
        if 0 <= t < v.n_tokens:
            keep[t] = False
    return pieces, closer, single, space, keep


def read_schema(job: InstancesJob) -> tuple[Any, str]:
    """(the parsed schema, "") or (None, why it is not JSON), from the bytes the job was planned
    with: a file changed since is the job's error (so not cached), never measured under the
    planned bytes' key."""
    path = resolve(job.schema_path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputError(
            f"schema {job.schema_path}", f"cannot be read: {type(e).__name__}: {first_line(str(e))}"
        ) from None
    if hashlib.sha256(data).hexdigest() != job.schema_digest:
        raise InputError(f"schema {job.schema_path}", "changed since the run was planned: run it again")
    try:
        return json.loads(data.decode("utf-8")), ""
    except (UnicodeDecodeError, ValueError) as e:
        return None, f"not JSON: {first_line(str(e))}"


_RESOURCE = re.compile(r"Resource '[^']*' is not present in a registry.*")
_UNIMPLEMENTED = re.compile(r"Unimplemented keys: (\[[^\]]*\])")


def _outside_refs(schema: Any) -> list[str]:
    """Every `$ref` that names another document (something before its `#`), sorted."""
    out: set[str] = set()
    stack = [schema]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            ref = x.get("$ref")
            if isinstance(ref, str) and ref.split("#", 1)[0]:
                out.add(ref.split("#", 1)[0])
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return sorted(out)


def _rejected(e: InputError, schema: Any) -> str:
    """llguidance's reason, made the same on every run: of several unresolvable `$ref`s it names
    whichever it meets first, in an order that changes from run to run (and may list unsupported
    keys in any order), which would make the tables differ between two runs of the same inputs."""
    msg = e.cause.removeprefix("llguidance rejected it: ")
    refs = _outside_refs(schema)
    msg = _RESOURCE.sub(
        "a $ref to a document it does not fetch" + (f" ({len(refs)} in the schema, first: {refs[0]})" if refs else ""),
        msg,
    )
    msg = _UNIMPLEMENTED.sub(lambda m: "Unimplemented keys: " + json.dumps(sorted(json.loads(m.group(1)))), msg)
    return msg[:ERROR_CHARS]


# -- instances ----------------------------------------------------------------------------------
def walk_instances(
    truth: Bridge, grammar: str, seed: int, params: Params, classes: tuple[Any, ...]
) -> tuple[list[str], str]:
    """(up to `params.instances` valid strings, the first llguidance error met while walking or "").

    Up to twice as many walks as instances are tried. See the module's docstring for the policy.
    """
    pieces, keep = classes[0], classes[4]
    rng = random.Random(seed)
    n = truth.vocab.n_tokens
    out: list[str] = []
    error = ""
    for _ in range(2 * params.instances):
        if len(out) >= params.instances:
            break
        m = truth.new_matcher(grammar)
        data = b""
        for i in range(params.max_tokens):
            if m.is_accepting and (i >= params.steer_after or rng.random() < 0.25):
                break
            try:
                allowed = mask_bits(m.mask(), n) & keep
            except LlgError as e:
                error = error or first_line(str(e))[:ERROR_CHARS]
                break
            tok = _pick(allowed, classes, i >= params.steer_after, rng)
            if tok is None:
                break
            m.consume(tok)
            data += pieces[tok]
        if m.is_accepting:
            try:
                out.append(data.decode("utf-8"))
            except UnicodeDecodeError:
                pass
    return out, error


def _pick(allowed: Any, classes: tuple[Any, ...], steer: bool, rng: random.Random) -> int | None:
    """One token of the mask `allowed` (None when it allows none), drawn with `rng`: three times in
    four one that is not whitespace; once `steer`ing, a closer, else a one-byte token, where the
    mask has one (the module's docstring says why)."""
    _, closer, single, space, _ = classes
    choice = np.flatnonzero(allowed & ~space) if rng.random() < 0.75 else np.empty(0, dtype=int)
    if steer:
        for pref in (closer, single):
            choice = np.flatnonzero(allowed & pref)
            if len(choice):
                break
    if not len(choice):
        choice = np.flatnonzero(allowed)
    if not len(choice):
        return None
    return int(choice[rng.randrange(len(choice))])


def check_instance(schema: Any, instance: str) -> dict[str, str]:
    """`jsonschema`'s verdict on one instance: valid, invalid (with its best-matching error), or
    unchecked (`jsonschema` could not use the schema)."""
    import jsonschema

    try:
        value = json.loads(instance)
    except ValueError as e:
        return {"verdict": "invalid", "message": f"not JSON: {first_line(str(e))}"}
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        err = jsonschema.exceptions.best_match(cls(schema).iter_errors(value))
    except Exception as e:  # noqa: BLE001 - any failure of the checker is its verdict, not ours
        return {"verdict": "unchecked", "message": f"{type(e).__name__}: {first_line(str(e))}"[:ERROR_CHARS]}
    if err is None:
        return {"verdict": "valid", "message": ""}
    where = "/".join(str(p) for p in err.absolute_path)
    return {"verdict": "invalid", "message": f"at /{where}: {first_line(err.message)}"[:ERROR_CHARS]}


def instances_record(job: InstancesJob, **fields: Any) -> dict[str, Any]:
    """An instances job's record: no instances yet, then `fields` (the one shape, for a job that
    ran and for one whose worker failed)."""
    return {
        "key": job.key,
        "schema": job.schema,
        "vocab": job.vocab,
        "status": "ok",
        "error": "",
        "instances": [],
        "walk_error": "",
        "jsonschema": [],
        **fields,
    }


def instances_job(job: InstancesJob) -> dict[str, Any]:
    rec = instances_record(job)
    schema, why = read_schema(job)
    if why:
        return {**rec, "status": "unreadable", "error": why}
    grammar = json_grammar(schema)
    truth, err = _bridge(job.vocab_path, job.vocab, "truth")
    if truth is None:
        return {**rec, "status": "not built", "error": err}
    try:
        truth.new_matcher(grammar)
    except InputError as e:
        return {**rec, "status": "rejected", "error": _rejected(e, schema)}
    seed = int(_sha([job.params.seed, job.schema])[:12], 16)
    insts, walk_error = walk_instances(truth, grammar, seed, job.params, _classes(job.vocab_path, job.vocab))
    return {
        **rec,
        "instances": insts,
        "walk_error": walk_error,
        "jsonschema": [check_instance(schema, x) for x in insts],
    }


# -- bridge jobs --------------------------------------------------------------------------------
COUNTS = (
    "walks",
    "steps",
    "under",
    "under_steps",
    "over",
    "over_steps",
    "over_collapsed",
    "stop_disagree",
    "errors",
    "skipped",
)


def bridge_record(job: BridgeJob, **fields: Any) -> dict[str, Any]:
    """A bridge job's record: zero counts and no timing, then `fields` (the one shape, for a job
    that ran and for one whose worker failed)."""
    ij = job.inst
    return {
        "key": job.key,
        "schema": ij.schema,
        "vocab": ij.vocab,
        "bridge": job.bridge,
        "status": "ok",
        "error": "",
        **{c: 0 for c in COUNTS},
        "first_error": "",
        "first_skip": "",
        "worst": {},
        "compile_us": [],
        "ttfm_us": None,
        "mask_us": [],
        "mask_errors": [],
        **fields,
    }


def bridge_job(job: BridgeJob) -> dict[str, Any]:
    ij = job.inst
    rec = bridge_record(job)
    schema, why = read_schema(ij)
    if why:
        return {**rec, "status": "unreadable", "error": why}
    grammar = json_grammar(schema)
    truth, terr = _bridge(ij.vocab_path, ij.vocab, "truth")
    bridge, berr = _bridge(ij.vocab_path, ij.vocab, job.bridge)
    if truth is None or bridge is None:
        return {**rec, "status": "not built", "error": berr or f"truth: {terr}"}
    result = soundness.SoundnessResult(ij.vocab, job.bridge, bridge.forcing)
    # the bridge's own compiles and masks are timed (`llg.timed`: by owner, so not the truth's)
    with timed(bridge) as timing:
        try:
            m = bridge.new_matcher(grammar)
        except InputError as e:
            return {
                **rec,
                "status": "rejected",
                "error": _rejected(e, schema),
                "compile_us": [t // 1000 for t in timing.compile_ns],
            }
        try:
            m.mask()
            ttfm = (timing.compile_ns[0] + timing.mask_ns[0]) // 1000
        except LlgError as e:
            result.errors.append((ij.schema, "", 0, str(e)))
            result.mask_errors.append(soundness.mask_error(bridge, ij.vocab, ij.schema, "", 0, "mask", str(e)))
            ttfm = None
        del m
        timing.mask_ns.clear()  # the first mask was time to first mask; the walks' masks are the per-step figure
        for x in job.instances:
            soundness.walk(truth, [bridge], {job.bridge: result}, ij.schema, grammar, x)
    row = result.row()
    worst = result.worst(1)
    return {
        **rec,
        **{c: row[c] for c in COUNTS},
        "first_error": row["first_error"][:ERROR_CHARS],
        "first_skip": result.skipped[0][2][:ERROR_CHARS] if result.skipped else "",
        "worst": soundness.describe(bridge, worst[0]) if worst else {},
        "compile_us": [t // 1000 for t in timing.compile_ns],
        "ttfm_us": ttfm,
        "mask_us": [round(t / 1000, 1) for t in timing.mask_ns],
        "mask_errors": [asdict(e) for e in result.mask_errors],
    }  # bug D: soundness.bug_d_frame


# -- running --------------------------------------------------------------------------------------
