"""The guide's pre-fix quotes, regenerated on real weights: a dated snapshot the report quotes.

    python -m llgbridge.measure.quotes [--out reports]      # what `make quotes` runs; `make bench` runs it too

The guide quotes what llama-server wrote without the fix on TinyLlama-1.1B: the free text after the
forced literal's matcher died (bug B) and a JSON key with a space inside it (bug A). This asks the
same of a trained model that has the same tokenizer behaviour, every input of
`catalogue.overridden()` (Gemma 3 270M loaded with `tokenizer.ggml.add_space_prefix=bool:true`), through
the real llama-server as the server notebook asks it (the same prompts, temperature 0, seed 0, one
request at a time), on the upstream build and the fixed one, on the llguidance llama.cpp pins; and
keeps the server's own `content` with the HTTP status, the error field and the `llg error` lines of
its log.

Why a snapshot, and not the report's results: a real model's words depend on the CPU (the venv's
ggml is built with `-march=native`, so a near-tie at temperature 0 can break another way on another
machine of the same kind), and the committed tables must regenerate byte for byte anywhere. So the
words live here, dated and with the machine that wrote them, like `make bench`'s timings; the page
quotes them as that, and `make report` never writes them. About 20 s per input on 2 cores.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path
from typing import Any

from .. import catalogue, models
from .. import generation as G
from ..analyses.server import cases as server_cases
from ..analyses.server import compute as server
from ..analyses.server import judge as server_judge
from ..analyses.server import llama_server as S
from ..errors import InputError, first_line
from ..modelfile import ModelFile
from ..paths import REPORTS, write_json
from ..vocab import Vocab

SNAPSHOT = "bench-real-quotes.json"
CASES = ("forced_literal", "json_enum")  # the guide's two quotes: bug B's free text, bug A's corrupted key


def cpu_model() -> str:
    """The CPU's model name (it decides the quantized kernels, and so the words)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def quote(name: str, max_tokens: int = 64) -> dict[str, Any]:
    """The two cases through the upstream and the fixed llama-server on input `name` (a model of
    `catalogue.overridden()`); InputError when the model or the servers are missing."""
    status, why = S.built()
    if why:
        raise InputError("the servers", why)
    m = catalogue.REAL_MODELS[name]
    path = models.model_path(name)
    vocab = Vocab(path, name, m.overrides)
    chat = G.Chat.of(ModelFile.read(path), vocab)
    prompts = server.prompts_for(chat, list(CASES), G.prompt_style(chat, "auto", False, m.instruct))
    llg = S.LLG_PINNED if S.LLG_PINNED in status["llguidance"] else status["llguidance"][0]
    rows = []
    for sampler in S.SAMPLERS:
        exe = S.binary(sampler, llg)
        log = server.LOG_DIR / name / f"{exe.name}-quotes.log"
        with S.serve(exe, path, log, extra=S.override_args(vocab.overrides)) as srv:
            server.taken(srv, vocab.overrides)
            for case in CASES:
                endpoint, sent_as, body = server.request_for(case, prompts[case], max_tokens, 0, 0.0, vocab)
                start = srv.log_size()
                reply = S.post(srv, endpoint, body)
                said = srv.settled_log(start)
                content = str((reply.body or {}).get("content", ""))
                tokens = [int(t) for t in (reply.body or {}).get("tokens") or []]
                tokens, _ = server_judge.strip_eog(vocab, tokens)
                ok = server_cases.judge_case(case).check(vocab.real_bytes(tokens).decode("utf-8", "replace"))
                rows.append(
                    {
                        "case": case,
                        "sampler": sampler,
                        "sent_as": sent_as,
                        "http_status": reply.status,
                        "error_field": reply.error != "",
                        "content": content,
                        "grammar_kept": ok,
                        "llg_error": first_line(next(iter(server.LLG_ERROR.findall(said)), "")),
                    }
                )
    return {
        "input": name,
        "model": m.file,
        "overrides": list(m.overrides),
        "llguidance": llg,
        "prompts": {c: prompts[c].text for c in CASES},
        "max_tokens": max_tokens,
        "rows": rows,
    }


def snapshot() -> dict[str, Any]:
    """Every overridden input's quotes, dated, with the machine that wrote them."""
    out: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "cpu": cpu_model(),
        "machine": f"{platform.platform()} {platform.machine()}",
        "inputs": [],
    }
    for name in catalogue.overridden():
        try:
            out["inputs"].append(quote(name))
        except (InputError, OSError) as e:  # one input's failure costs only its quotes
            print(f"quotes: {name}: {first_line(str(e))}", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m llgbridge.measure.quotes", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPORTS)
    a = ap.parse_args(argv)
    snap = snapshot()
    if not snap["inputs"]:
        print("quotes: nothing was quoted; the snapshot is left as it was", file=sys.stderr)
        return 1
    write_json(a.out / SNAPSHOT, snap)
    for q in snap["inputs"]:
        for r in q["rows"]:
            print(f"{q['input']} {r['sampler']} {r['case']}: HTTP {r['http_status']}, {json.dumps(r['content'][:90])}")
    print(f"wrote {a.out / SNAPSHOT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
