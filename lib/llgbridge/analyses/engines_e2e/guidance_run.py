"""guidance end to end, in a process of its own with guidance's own pins first on `sys.path`.

    PYTHONPATH=SIDECAR python -m llgbridge.analyses.engines_e2e.guidance_run JOB.json OUT.json

guidance 0.3.1 requires llguidance 1.5.0, the suite pins 1.9.1: guidance is installed apart
(`make setup`, `sidecar.install`) with its own pins, and this process puts that folder ahead of
the venv's packages (PYTHONPATH), so `import guidance` gets the llguidance guidance declares. Its
`llamacpp` extra pins llama-cpp-python 0.3.16; this process runs the venv's 0.3.36, the one every
other engine of the suite runs on (the page says so).

The model is the suite's own `Llama` (`generate.load_model`, as the other engines get it), handed
to `guidance.models.LlamaCpp`, which builds its token table with
`llguidance.llamacpp.lltokenizer_from_vocab` (guidance/models/_llama_cpp.py:68, the sentinel
bridge) and drives the model itself (`LlamaCppEngine.get_logits`: its own `llama_decode` and
mask, not llama-cpp-python's sampler). Each case is `model + prompt + gen(regex=..., max_tokens=N,
temperature=0)`; the tokens are read from the responses guidance's engine yields (watched, not
changed): each response's `backtrack` drops tokens, its `tokens` not marked backtracked are
appended, as its engine does to its own context.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from ... import generate as G
from ...generation import Chat
from ...modelfile import ModelFile

__all__ = ["main"]


def watch(engine_type: Any, log: list[Any]) -> None:
    """Record every response guidance's engine yields: (backtrack, [(token, backtracked)]), for its
    last call only (`model + prompt` is a call of its own, the prompt's text forced)."""
    call = engine_type.__call__

    def watched(self: Any, *args: Any, **kwargs: Any) -> Any:
        gen = call(self, *args, **kwargs)
        log.clear()
        while True:
            try:
                r = next(gen)
            except StopIteration as stop:
                return stop.value
            log.append((int(r.backtrack or 0), [(int(t.token_id), bool(t.is_backtracked)) for t in r.tokens]))
            yield r

    engine_type.__call__ = watched


def replay(log: list[Any]) -> tuple[list[int], int]:
    """The tokens guidance's engine added after the prompt, and how many prompt tokens its first
    backtrack took back (token healing: their bytes come again at the front of what follows)."""
    out: list[int] = []
    healed = 0
    for backtrack, toks in log:
        drop = min(backtrack, len(out))
        out = out[: len(out) - drop]
        healed += backtrack - drop
        out += [t for t, back in toks if not back]
    return out, healed


def one_case(model: Any, case: dict[str, Any], prompt: Any, log: list[Any], max_tokens: int) -> dict[str, Any]:
    from guidance import gen  # only in the sidecar's process (see `run`)

    try:
        lm = model + prompt.text + gen("out", regex=case["regex"], max_tokens=max_tokens, temperature=0.0)
        text, error = str(lm["out"]), ""
    except Exception as e:  # noqa: BLE001 - the library's refusal is its row's one line
        text, error = "", f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else 'no message'}"
    tokens, healed = replay(log)
    prompt_tokens = model._interpreter.engine.tokenizer.encode(prompt.text.encode())
    return {
        "case": case["case"],
        "prompt": prompt.kind,
        "tokens": tokens,
        "healed": prompt_tokens[len(prompt_tokens) - healed :] if healed else [],
        # guidance ends a generation when its grammar is complete or at max_tokens
        "stop": "limit" if len(tokens) >= max_tokens else "end (grammar complete)",
        "text": text,
        "error": error,
        "ignored": [],
    }


def run(job: dict[str, Any]) -> dict[str, Any]:
    from importlib import metadata

    # here, not at the top: the module is imported (its layer checked, its code hashed) where guidance is not
    import guidance
    import llguidance
    from guidance.models._llama_cpp import LlamaCppEngine

    t0 = time.perf_counter()
    llm = G.load_model(
        ModelFile.read(job["path"]), seed=job["seed"], n_threads=job["n_threads"], overrides=job["overrides"]
    )
    # the matrix's prompt for each case, made as for the other engines (plain text on a synthetic
    # model, the chat template rendered on an instruct one), handed to guidance as text
    chat = Chat.of_llm(llm)
    style = G.prompt_style(chat, "auto", *job["style"])
    prompts = {c["case"]: G.prompt_for(chat, G.CASES[c["prompt_case"]], style) for c in job["cases"]}
    log: list[Any] = []
    watch(LlamaCppEngine, log)
    model = guidance.models.LlamaCpp(llm, echo=False)
    cases = [one_case(model, c, prompts[c["case"]], log, job["max_tokens"]) for c in job["cases"]]
    return {
        "cases": cases,
        "seconds": time.perf_counter() - t0,
        # what this process imported, read from where it imported it: the sidecar's pins, or not
        "versions": {
            name: metadata.version(name) for name in ("guidance", "llguidance", "guidance-stitch", "llama_cpp_python")
        },
        "llguidance_apart": Path(llguidance.__file__).parent.parent == Path(job["sidecar"]),
    }


def main() -> int:
    # a file, not stdout: guidance prints notes of its own there (gpustat's absence)
    job, out = sys.argv[1:3]
    Path(out).write_text(json.dumps(run(json.loads(Path(job).read_text()))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
