"""The real llama-server answering the guide's requests (`llgbridge.analyses.server.compute`)."""

from __future__ import annotations

from ..registry import NUM, Analysis, Schema

ANALYSIS = Analysis(
    "server",
    # the matrix's: the model it serves is the one the matrix runs (`matrix.model_paths`)
    ("generate.py", "synth.py", "analyses/native/", "soundness.py", "analyses/matrix/"),
    Schema(
        {
            "rows": list,
            "tokens": list,
            "load": list,
            "llguidance": list,
            "port_llguidance": str,
            "builds": dict,
            "cases": dict,
            "temperature": NUM,
            "seed": int,
        },
        {
            "rows": {
                "model": str,
                "vocab": str,
                "llguidance": str,
                "sampler": str,
                "case": str,
                "http_status": int,
                "error_field": bool,
                "outcome": str,
            },
            "load": {
                "model": str,
                "llguidance": str,
                "sampler": str,
                "requests": int,
                "violations": int,
                "healthy_after": bool,
            },
        },
    ),
    runs_on="server",
    whatif=True,
    built=(("data/native/server/bin", "*"),),
    gpu=True,
    order=11,
    page=70,
)
