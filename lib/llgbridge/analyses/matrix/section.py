"""End-to-end model matrix (guide 8): generation through the port, synthetic and real models."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ...catalogue import REAL_MODELS, overridden
from ...report.data import PageData, takes_page_data
from ...report.prose import blocks
from ...report.table import Cell, Section, Table, after_fix, first_words, shows
from ...show import show_text


def mask_share(bench: pd.DataFrame) -> list[str]:
    """The mask's share of a real decode step per model and bridge, from the committed `make bench`
    snapshot."""
    if bench.empty:
        return []
    b = bench[(bench.benchmark == "decode_mask_ms") & (bench.variant != "none")]
    return [f"{r.vocab} {r.variant} {100 * float(r.ratio):.1f}%" for r in b.itertuples()]


REAL_OUTPUTS_NOTE = (
    "A real model's text is left out of the committed tables: its quantized kernels are chosen "
    "by the CPU, so at temperature 0 a near-tie can break another way on another machine of the same kind. "
    "What the grammar decides (the outcome) is kept; the text is in each result file "
    "(`data/results/matrix/NAME.json`, `outputs`)."
)
BRIDGE_ORDER = {b: i for i, b in enumerate(("upstream", "fixed", "sentinel"))}


def matrix_frame(ok: list[dict[str, Any]]) -> pd.DataFrame:
    """Every generation row, synthetic models first, then by model, case and bridge."""
    df = pd.DataFrame([row for r in ok for row in r["rows"]])
    # results written before prompts were recorded are all plain text
    df["prompt"] = df["prompt"].fillna("plain") if "prompt" in df else "plain"
    return df.sort_values(
        ["synthetic", "model", "case", "bridge"], ascending=[False, True, True, True], kind="stable"
    ).reset_index(drop=True)


def score(x: pd.DataFrame) -> str:
    """One bridge's runs on one model: passes of runs, llguidance errors, the other outcomes."""
    if x.empty:
        return ""
    n_err = int(x.llg_errors.sum())
    other = ", ".join(f"{k} {v}" for k, v in sorted(x.outcome.value_counts().items()) if k != "pass")
    return f"{int((x.outcome == 'pass').sum())}/{len(x)}, {n_err} llg error{'s' if n_err != 1 else ''}" + (
        f" ({other})" if other else ""
    )


def model_rows(part: pd.DataFrame, label: str) -> list[dict[str, Any]]:
    """Guide 8's table: per model, its runs without and with the fix, and whether greedy engaged."""
    rows = []
    for model, g in part.groupby("model", sort=False):
        up, fx = g[g.bridge == "upstream"], g[g.bridge == "fixed"]
        up_bad, fx_bad = bool((up.outcome != "pass").any()), bool((fx.outcome != "pass").any())
        greedy = not fx.empty and bool(fx.greedy.iloc[0])
        rows.append(
            {
                "model": f"{model} ({label})",
                "vocab": g.vocab.iloc[0],
                "prompt": g.prompt.iloc[0],
                "without fix": Cell(score(up), shows(up_bad)),
                "with fix": Cell(score(fx), after_fix(up_bad, fx_bad)),
                "greedy engaged": Cell("yes", "cost") if greedy else "no",
            }
        )
    return rows


def failed_real_rows(failed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A real model whose run failed (its fetch, its load): its rows are marked failed, with the cause."""
    return [
        {
            "model": f"{REAL_MODELS[f['vocab']].shown} (real)",
            "vocab": f["vocab"],
            "prompt": "",
            "without fix": Cell(f"failed: {f.get('error', '')}", "bad"),
            "with fix": Cell("failed", "bad"),
            "greedy engaged": "",
        }
        for f in failed
        if f.get("vocab") in REAL_MODELS
    ]


def real_outputs(real: pd.DataFrame) -> list[dict[str, Any]]:
    """Every real outcome per case and bridge; the text only where the table keeps it (a real
    model's text varies across CPUs of one kind, so the committed table holds its outcome:
    generate.MatrixRow.row)."""
    return [
        {
            "model": model,
            "case": case,
            **{
                b: x.outcome.iloc[0] + (f": {show_text(x.output.iloc[0])}" if x.output.iloc[0] else "")
                for b, x in sorted(g.groupby("bridge"), key=lambda bx: BRIDGE_ORDER.get(bx[0], 9))
            },
        }
        for (model, case), g in real.groupby(["model", "case"], sort=False)
    ]


def synthetic_quotes(df: pd.DataFrame) -> pd.DataFrame:
    """The synthetic models' outputs without the fix that are not a pass, as produced."""
    quotes = df[(df.bridge == "upstream") & (df.outcome != "pass")]
    return pd.DataFrame(
        [
            {"model": q.model, "case": q.case, "output": q.output[:100], "llguidance's error": first_words(q.error, 80)}
            for q in quotes.itertuples()
            if q.synthetic
        ]
    )


def real_facts(res: PageData, real: pd.DataFrame) -> dict[str, Any] | None:
    """What the fragment says of the real models: upstream's failures, and the census's differing
    tokens per real vocab (None where no real model ran)."""
    if not len(real):
        return None
    census_ok, _ = res.load("census")
    differing = {r["vocab"]: r["summary"]["differing"] for r in census_ok if r["vocab"] in REAL_MODELS}
    real_up_bad = real[(real.bridge == "upstream") & (real.outcome != "pass")]
    return {
        "up_bad": len(real_up_bad),
        "up_cases": int((real.bridge == "upstream").sum()),
        "differing": [f"{v} {n}" for v, n in differing.items()],
        "clean": [v for v, n in differing.items() if not n],
    }


def matrix_said(res: PageData, ok: list[dict[str, Any]], df: pd.DataFrame) -> dict[str, str]:
    """The section's fragment, rendered: where and how the matrix ran, and what it found."""
    devices = sorted({f"{r['device']} (n_gpu_layers={r['n_gpu_layers']})" for r in ok})
    settings = sorted({(r["temperature"], r["seed"], r["max_tokens"]) for r in ok})
    return blocks(
        "matrix",
        devices=devices,
        settings=[f"{t}, {s}, {m}" for t, s, m in settings],
        mask_share=mask_share(res.bench),
        real=real_facts(res, df[~df.synthetic]),
        overridden=[f"`{v}`" for v in overridden() if v in set(df.vocab)],
    )


@takes_page_data
def matrix_section(res: PageData) -> Section | None:
    """Guide 8: generation through the port on synthetic and real models, without and with the fix."""
    ok, failed = res.load("matrix")
    if not ok:
        return None
    df = matrix_frame(ok)
    real = df[~df.synthetic]
    real_rows = model_rows(real, "real") + failed_real_rows(failed)
    outputs = real_outputs(real)
    sec = Section("matrix", "End-to-end model matrix (guide 8)", notebook="matrix")
    said = matrix_said(res, ok, df)
    sec.claim, sec.text, sec.more = said["claim"], said["text"], said["more"]
    sec.views.append(Table(pd.DataFrame(model_rows(df[df.synthetic], "synthetic")), caption="Synthetic models"))
    if real_rows:
        sec.views.append(Table(pd.DataFrame(real_rows), caption="Real models", collapsed=True))
    sec.views.append(
        Table(
            synthetic_quotes(df),
            caption="Outputs without the fix that are not a pass, as produced (synthetic models)",
            collapsed=True,
        )
    )
    if outputs:
        sec.views.append(
            Table(
                pd.DataFrame(outputs),
                caption="Real models: every outcome, per case and bridge",
                collapsed=True,
                note=REAL_OUTPUTS_NOTE,
            )
        )
    sec.raw_table("matrix", df)
    return sec
