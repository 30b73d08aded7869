"""The other engines end to end (issue 46): each library's own llama.cpp logits processor
generating on the matrix's models, judged by the real bytes of the tokens it let through.

Per engine of `engines.compute.ENGINES` and model (the matrix's: a synthetic model around the
input's tokenizer, or the real model), two cases: the leak regex (`engines.compute.LEAK_REGEX`,
the guide's `start: /[.a-z]{2,6}/ "!"`) and the forced literal (`grammars.FORCED_LITERAL`).
Each is generated greedily by the library's own way in, never re-implemented here:

- lm-format-enforcer: `build_llamacpp_logits_processor(data, RegexParser(regex))` in the
  `logits_processor` of llama-cpp-python's `Llama.create_completion` (the table built once per
  model by `build_token_enforcer_tokenizer_data(llm)`, which the processor builder takes);
- outlines: `outlines.Generator(outlines.from_llamacpp(llm), outlines.types.Regex(regex))` called
  with the prompt (its chat mode where the matrix renders a chat template, as outlines does
  through llama-cpp-python's chat handler), which hands its processor to the same call.

The tokens are the ones llama-cpp-python sampled (its `Llama.sample`, watched, not changed);
their real bytes are `llama_token_to_piece(t, 0, false)` joined (`Vocab.real_bytes`), judged by
`re` as the matrix judges (`generate.judge`: a full match at the end of generation, a prefix at
the token limit). Beside them, the text the library returned. An exception a processor raises
inside llama-cpp-python's sampler callback is not seen by the caller (ctypes prints it and the
step goes on unconstrained): it is caught by `sys.unraisablehook` and makes the row an error.

Each engine runs per model in a process of its own bounded by `engines.compute.LIMIT_S`
(`engines.compute.run_limited`): one that raises, hangs or dies is one line naming engine, model
and cause, and the others go on.

llama.cpp's GBNF sampler is asked as users meet it: through the real `llama-server`
(`server.llama_server`: the upstream build, started per model as the server analysis starts it),
each case sent as a plain GBNF `grammar` to `/completion` (`common/sampling.cpp` hands a grammar
without `%llguidance` to `llama_sampler_init_grammar`; llguidance is never reached). Its cases: the
leak and the literal in GBNF (`engines.compute.LEAK_GBNF`, `gbnf_literal`), the matrix's JSON
schema as llama.cpp's own `json_schema_to_grammar(force_gbnf)` writes it (`server.cases.gbnf_of`:
what a server built without llguidance makes of a `json_schema`), bug C's literal (the
end-of-turn token's text inside text) and a control token's text inside text (`control_text`),
where the vocab has them. Each answer is judged by the
tokens the server returned (`return_tokens`), as real bytes, and cross-checked by the server's own
`content` (`server.judge.content_match`): where the two disagree the row says `judge disagrees`,
a bug of this suite's until shown otherwise.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

from ... import catalogue
from ... import generate as G
from ...cases import JSON_SCHEMA
from ...errors import first_line
from ...generation import Chat
from ...grammars import FORCED_LITERAL, LEAK_GRAMMAR, literal_grammar
from ...modelfile import ModelFile
from ...overrides import Override, model_label
from ...vocab import Vocab
from ..engines.compute import (
    BY_NAME,
    LEAK_GBNF,
    LEAK_REGEX,
    LIMIT_S,
    Engine,
    check_names,
    gbnf_literal,
    installed_version,
    regex_literal,
    run_limited,
)
from ..matrix.compute import model_vocab
from ..native.trace import special_literal
from ..server import llama_server as S
from ..server.cases import gbnf_of, special_case
from ..server.compute import taken
from ..server.judge import content_match, reply_content, strip_eog
from . import EnginesE2ePayload

__all__ = ["CASES", "Settings", "check_names", "judge", "run"]


@dataclass(frozen=True)
class E2eCase:
    name: str
    regex: str  # in the engines' regex language
    judge: G.Case  # the independent judge (`generate.judge`) of the real bytes
    prompt_case: str  # the matrix case whose prompt a real model gets (its instruction)


LEAK = G.Case(
    "leak",
    LEAK_GRAMMAR,
    lambda s: re.fullmatch(LEAK_REGEX, s) is not None,
    "the leak grammar's regex form",
    lambda s: re.fullmatch(r"[.a-z]{0,6}|[.a-z]{2,6}!", s) is not None,
)
CASES: dict[str, E2eCase] = {
    "leak": E2eCase("leak", LEAK_REGEX, LEAK, "dots"),
    "forced_literal": E2eCase(
        "forced_literal", regex_literal(FORCED_LITERAL), G.CASES["forced_literal"], "forced_literal"
    ),
}
MATCHES = {"pass": "full", "truncated": "prefix", "violation": "no"}
GBNF = "llama.cpp GBNF"  # asked through llama-server, not through llama-cpp-python's processor


@dataclass(frozen=True)
class Settings:
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = 16
    n_threads: int = 1
    limit_s: float = LIMIT_S


# --- in the engine's own process -------------------------------------------------------------


def _lmfe(llm: Any, regex: str, prompt: G.Prompt, instruction: str, s: Settings, memo: dict[str, Any]) -> str:
    from llama_cpp import LogitsProcessorList
    from lmformatenforcer import RegexParser
    from lmformatenforcer.integrations.llamacpp import (
        build_llamacpp_logits_processor,
        build_token_enforcer_tokenizer_data,
    )

    if "data" not in memo:  # the library's table, once per model (its builder takes it in place of llm)
        memo["data"] = build_token_enforcer_tokenizer_data(llm)
    processor = build_llamacpp_logits_processor(memo["data"], RegexParser(regex))
    toks = llm.tokenize(prompt.text.encode(), add_bos=prompt.add_bos, special=prompt.parse_special)
    out = llm.create_completion(
        toks,
        logits_processor=LogitsProcessorList([processor]),
        max_tokens=s.max_tokens,
        temperature=s.temperature,
        seed=s.seed,
    )
    return str(out["choices"][0]["text"])


def _outlines(llm: Any, regex: str, prompt: G.Prompt, instruction: str, s: Settings, memo: dict[str, Any]) -> str:
    import outlines
    from outlines.types import Regex

    chat = prompt.kind == "chat template"
    key = f"model-{chat}"
    if key not in memo:
        memo[key] = outlines.from_llamacpp(llm, chat_mode=chat)
    generator = outlines.Generator(memo[key], Regex(regex))
    text = generator(
        instruction if chat else prompt.text, max_tokens=s.max_tokens, temperature=s.temperature, seed=s.seed
    )
    return str(text)


CALLS = {"lm-format-enforcer": _lmfe, "outlines": _outlines}


def _case(llm: Any, engine: str, case: E2eCase, prompt: G.Prompt, s: Settings, memo: dict[str, Any]) -> dict[str, Any]:
    """One case through the library, in its process: the tokens sampled, the library's text, and
    what it raised, where it raised it."""
    import llama_cpp

    sampled: list[int] = memo["sampled"]
    ignored: list[str] = memo["ignored"]
    sampled.clear()
    ignored.clear()
    instruction = G.CASES[case.prompt_case].instruction
    try:
        text, error = CALLS[engine](llm, case.regex, prompt, instruction, s, memo), ""
    except Exception as e:  # noqa: BLE001 - the library's refusal is its row's one line
        text, error = "", f"{type(e).__name__}: {first_line(str(e)) or 'no message'}"
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    eog = next((i for i, t in enumerate(sampled) if llama_cpp.llama_vocab_is_eog(vocab, t)), None)
    return {
        "case": case.name,
        "prompt": prompt.kind,
        "tokens": sampled[:eog] if eog is not None else list(sampled),
        "stop": f"eog {sampled[eog]}" if eog is not None else "limit",
        "text": text,
        "error": error,
        "ignored": list(dict.fromkeys(ignored)),
    }


def _watch(llm: Any, memo: dict[str, Any]) -> None:
    """Record what llama-cpp-python samples (its `sample`, called by `Llama.generate`) and what a
    processor raises inside its sampler callback, where the caller never sees it."""
    sampled: list[int] = []
    ignored: list[str] = []
    sample = llm.sample

    def watched(*args: Any, **kwargs: Any) -> int:
        token = sample(*args, **kwargs)
        sampled.append(int(token))
        return int(token)

    def hook(u: Any) -> None:
        ignored.append(f"{type(u.exc_value).__name__}: {first_line(str(u.exc_value))}")

    llm.sample = watched
    sys.unraisablehook = hook
    memo.update(sampled=sampled, ignored=ignored)


def generate_all(
    engine: str, path: str, overrides: tuple[Override, ...], style: tuple[bool, bool | None], s: Settings
) -> Any:
    """Every case of one engine on one model, in the engine's own process: a dict per case."""
    synthetic, instruct = style
    t0 = time.perf_counter()
    llm = G.load_model(ModelFile.read(path), seed=s.seed, n_threads=s.n_threads, overrides=overrides)
    chat = Chat.of_llm(llm)
    resolved = G.prompt_style(chat, "auto", synthetic, instruct)
    memo: dict[str, Any] = {}
    _watch(llm, memo)
    out = [_case(llm, engine, c, G.prompt_for(chat, G.CASES[c.prompt_case], resolved), s, memo) for c in CASES.values()]
    return {"cases": out, "seconds": time.perf_counter() - t0}


def run_sidecar(
    e: Engine, path: str, overrides: tuple[Override, ...], style: tuple[bool, bool | None], s: Settings
) -> tuple[Any, str]:
    """A sidecar engine's cases (`guidance_run`), in a fresh interpreter with its own pins first on
    `sys.path` (PYTHONPATH): the venv's process has the suite's llguidance imported already. (its
    result, "") or (None, the cause in one line), the input's `path` written as its file name."""
    job = {
        "path": path,
        "sidecar": str(e.sidecar_dir()),
        "overrides": [o.text for o in overrides],
        "style": list(style),
        "seed": s.seed,
        "n_threads": s.n_threads,
        "max_tokens": s.max_tokens,
        "cases": [{"case": c.name, "regex": c.regex, "prompt_case": c.prompt_case} for c in CASES.values()],
    }
    env = {**os.environ, "PYTHONPATH": str(e.sidecar_dir())}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "job.json").write_text(json.dumps(job))
        argv = [sys.executable, "-m", f"{__package__}.guidance_run", f"{tmp}/job.json", f"{tmp}/out.json"]
        try:
            p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=s.limit_s)
        except subprocess.TimeoutExpired:
            return None, f"no answer within the {s.limit_s:g} s limit: stopped"
        if p.returncode != 0:
            said = [line for line in p.stderr.splitlines() if line.strip()]
            why = said[-1].strip() if said else "no output"
            return None, f"its process ended with exit {p.returncode}: {why}".replace(path, Path(path).name)
        got = json.loads((Path(tmp) / "out.json").read_text())
    if not got["llguidance_apart"]:
        # the venv's llguidance in its place would be a run of other pins than the row names
        return None, f"llguidance {got['versions']['llguidance']} was imported from outside {e.name}'s own folder"
    return got, ""


# --- in the notebook's process ----------------------------------------------------------------


def judge(case: str | G.Case, real: bytes, stop: str) -> str:
    """The real bytes against the case's grammar, as the matrix judges: `full`, `prefix` (at the
    token limit, still a prefix of a match) or `no`."""
    spec = CASES[case].judge if isinstance(case, str) else case
    return MATCHES[G.judge(spec, G.Generation(output=real, stop=stop))]


def healed(v: Vocab, got: dict[str, Any]) -> tuple[bytes, str]:
    """The real bytes generated after the prompt, and why not where they do not read so. guidance
    heals the prompt's last tokens (takes them back, then generates their bytes again as the
    grammar's forced start): its tokens begin with those bytes, which are the prompt's, not output."""
    real = v.real_bytes(got["tokens"])
    front = v.real_bytes(got.get("healed", []))
    if real.startswith(front):
        return real[len(front) :], ""
    return real, f"its tokens do not begin with the healed prompt tokens' bytes {front!r}"


def case_row(base: dict[str, Any], got: dict[str, Any], v: Vocab, spec: G.Case | None = None) -> dict[str, Any]:
    """A case's row: the tokens, their real bytes, the library's text, the judgement (by `spec`
    where the case is none of `CASES`)."""
    real, healed_off = healed(v, got)
    matches = judge(spec or got["case"], real, got["stop"].split()[0])
    cause = (
        got["error"]
        or healed_off
        or (
            f"raised in llama-cpp-python's sampler callback, which ignores it (generation went on unconstrained): "
            f"{got['ignored'][0]}"
            if got["ignored"]
            else ""
        )
    )
    outcome = "error" if cause else ("violates" if matches == "no" else "ok")
    return {
        **base,
        "case": got["case"],
        "prompt": got["prompt"],
        "outcome": outcome,
        "matches": matches,
        "stop": got["stop"],
        "n_tokens": len(got["tokens"]),
        "tokens": " ".join(map(str, got["tokens"])),
        "output": real.decode("utf-8", "backslashreplace"),
        "text": got["text"],
        "agree": got["text"].encode("utf-8") == real,
        "error": cause,
    }


# --- llama.cpp's GBNF sampler, through llama-server ------------------------------------------


def gbnf_cases(v: Vocab) -> list[tuple[str, str, G.Case, str]]:
    """(case, GBNF, its judge, the matrix case whose prompt it gets) for the server."""

    out = [
        ("leak", LEAK_GBNF, LEAK, "dots"),
        ("forced_literal", gbnf_literal(FORCED_LITERAL), G.CASES["forced_literal"], "forced_literal"),
        # what a server built without llguidance makes of the matrix's `json_schema`
        ("json_enum", gbnf_of(JSON_SCHEMA), G.CASES["json_enum"], "json_enum"),
    ]
    spec = special_case(v)
    if spec is not None:
        out.append(("special_literal", gbnf_literal(special_literal(v)), spec, "forced_literal"))
    control = control_text(v)
    if control:
        # the sampler admits such a token where its text is due (`engines`' control probe): does a
        # model take it, whose bytes are then missing from the answer?
        text = f"say {control} now"
        out.append(
            (
                "control_literal",
                gbnf_literal(text),
                G.Case(
                    "control_literal",
                    literal_grammar(text),
                    text.__eq__,
                    "a literal spelling a control token's text",
                    text.startswith,
                ),
                "forced_literal",
            )
        )
    return out


def control_text(v: Vocab) -> str:
    """The text (`special=true`) of the lowest control token that is no end token and has
    printable text, as the engines' control probe picks it; "" where there is none."""
    eog = set(v.eog_tokens)
    for t, p in enumerate(v.iter_pieces()):
        if p or t in eog:
            continue
        try:
            text = v.token_to_piece(t, special=True).decode("utf-8")
        except UnicodeDecodeError:
            continue
        if text.strip() and text.isprintable():
            return text
    return ""


def gbnf_answer(case: str, v: Vocab, body: dict[str, Any], prompt: G.Prompt) -> dict[str, Any]:
    """A `/completion` answer as `case_row` reads a case: the tokens before the end token, how it
    stopped, the server's `content`, and `content_match` (its content against the tokens' bytes)."""

    text, tokens, stop, _ = reply_content(body, "/completion")
    kept, ended = strip_eog(v, tokens or [])
    how = f"eog {tokens[len(kept)]}" if ended and tokens else ("eog" if stop == "eos" else "limit")
    return {
        "case": case,
        "prompt": prompt.kind,
        "tokens": kept,
        "stop": how,
        "text": text,
        "error": "" if tokens is not None else "the server returned no tokens",
        "ignored": [],
        "content_match": content_match(v, tokens, text),
    }


def gbnf_model(
    base: dict[str, Any], v: Vocab, path: Path, overrides: tuple[Override, ...], style: Any, s: Settings
) -> Any:
    """Every GBNF case on one model through llama-server: (rows, seconds). A server that is not
    built, cannot start or stops answering is one row naming the cause."""

    _, why = S.built()
    exe = S.binary("upstream", S.LLG_PINNED)
    if why:
        return [{**base, "case": "", "outcome": "error", "error": f"llama-server: {why}"}], None
    synthetic, instruct = style
    t0 = time.perf_counter()
    chat = Chat.of(ModelFile.read(path), v)  # as the server analysis renders them: no weights loaded here
    resolved = G.prompt_style(chat, "auto", synthetic, instruct)
    rows: list[dict[str, Any]] = []
    log = S.SERVER / "logs" / "engines_e2e" / f"{model_label(path.name, overrides)}.log"
    try:
        with S.serve(exe, path, log, threads=s.n_threads, extra=S.override_args(overrides)) as srv:
            taken(srv, overrides)
            for case, gbnf, spec, prompt_case in gbnf_cases(v):
                prompt = G.prompt_for(chat, G.CASES[prompt_case], resolved)
                body = {
                    "prompt": prompt.text,
                    "n_predict": s.max_tokens,
                    "temperature": s.temperature,
                    "seed": s.seed,
                    "return_tokens": True,
                    "cache_prompt": False,
                    "grammar": gbnf,
                }
                reply = S.post(srv, "/completion", body)
                if reply.status != 200 or reply.body is None:
                    why = reply.error or first_line(reply.text) or f"HTTP {reply.status}"
                    rows.append({**base, "case": case, "outcome": "error", "error": f"llama-server: {why}"})
                    continue
                got = gbnf_answer(case, v, reply.body, prompt)
                row = case_row(base, got, v, spec)
                row["content_match"] = got["content_match"]
                if got["content_match"].startswith("differs"):
                    row["outcome"] = "judge disagrees"
                rows.append(row)
    except S.ServerError as e:
        rows.append({**base, "case": "", "outcome": "error", "error": f"llama-server: {first_line(str(e))}"})
    return rows, time.perf_counter() - t0


def one_model(
    vocab: str, real: bool, path: Path, overrides: tuple[Override, ...], engines: list[str], s: Settings
) -> Any:
    """Every named engine on one model: its rows and each engine's seconds."""
    model = ModelFile.read(path)
    v = model_vocab(model, vocab, real, overrides)
    style = (model.synthetic, catalogue.REAL_MODELS[vocab].instruct if real else None)
    rows: list[dict[str, Any]] = []
    seconds: dict[str, float] = {}
    for name in engines:
        version = installed_version(BY_NAME[name])
        base = {"model": model_label(path.name, overrides), "vocab": v.name, "synthetic": style[0]}
        base |= {"engine": name, "version": version}
        if "not installed" in version:
            rows.append({**base, "case": "", "outcome": "error", "error": f"{version}: not run"})
            continue
        if name == GBNF:
            got_rows, secs = gbnf_model(base, v, path, overrides, style, s)
            rows += got_rows
            if secs is not None:
                seconds[name] = round(secs, 3)
            continue
        e = BY_NAME[name]
        if e.sidecar:
            got, err = run_sidecar(e, str(path), overrides, style, s)
        else:
            got, err = run_limited(generate_all, (name, str(path), overrides, style, s), str(path), s.limit_s)
        if got is None:
            rows.append({**base, "case": "", "outcome": "error", "error": err})
            continue
        rows += [case_row(base, c, v) for c in got["cases"]]
        seconds[name] = round(got["seconds"], 3)
    return rows, seconds


def run(
    vocab: str, real: bool, paths: list[Path], overrides: tuple[Override, ...], engines: list[str], s: Settings
) -> EnginesE2ePayload:
    """The `engines_e2e` result's payload: every engine on every model of `paths`."""
    rows: list[dict[str, Any]] = []
    seconds: dict[str, dict[str, float]] = {}
    for path in paths:
        got, secs = one_model(vocab, real, path, overrides, engines, s)
        rows += got
        seconds[path.name] = secs
    out = {**asdict(s), "models": [p.name for p in paths], "rows": rows, "seconds": seconds}
    return cast(EnginesE2ePayload, out)
