"""The SchemaStore corpus through every bridge (`llgbridge.analyses.corpus.compute`)."""

from __future__ import annotations

from ..registry import BRIDGE_ROW, MS, Analysis, Schema

ANALYSIS = Analysis(
    "corpus",
    ("pool.py", "jobserver.py", "analyses/corpus/schemas.tsv", "soundness.py"),
    Schema(
        {
            "schemas": int,
            "params": dict,
            "rows": list,
            "failures": list,
            "rejected": list,
            "timing": list,
            "hist": dict,
            "hist_edges_us": list,
        },
        {
            "rows": {**BRIDGE_ROW, "schemas": int, "compiled": int, "under": int, "over": int},
            "failures": {**BRIDGE_ROW, "schema": str, "status": str},
            "rejected": {"schema": str, "status": str, "error": str, "vocabs": str, "bridges": str},
            "timing": {**BRIDGE_ROW, "masks": int, "mask_us_p50": MS, "mask_us_p99": MS},
        },
    ),
    runs_on="corpus-sample",
    whatif=False,
    built=(("data/schemas", "*.json"),),
    order=10,
    page=110,
)
