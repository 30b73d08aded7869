"""`run.execute_batch` in a process of its own, the statuses printed as JSON (see execute.py).

python tests/programs/execute_batch.py VOCAB NOTEBOOK,NOTEBOOK,... OUT_ROOT RESULTS NOTEBOOKS_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from llgbridge import run

vocab, notebooks, out_root, results, folder = sys.argv[1:]
print(
    json.dumps(
        run.execute_batch(
            vocab, notebooks.split(","), out_root=Path(out_root), results_dir=Path(results), notebooks_dir=Path(folder)
        )
    )
)
