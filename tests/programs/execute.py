"""`run.execute` in a process of its own, its status printed as JSON: a test that lets the kernel
abort reads the status here, so the abort's output never reaches pytest's own process.

    python tests/programs/execute.py NOTEBOOK VOCAB OUT_ROOT RESULTS NOTEBOOKS_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from llgbridge import run

notebook, vocab, out_root, results, notebooks = sys.argv[1:]
print(
    json.dumps(
        run.execute(notebook, vocab, out_root=Path(out_root), results_dir=Path(results), notebooks_dir=Path(notebooks))
    )
)
