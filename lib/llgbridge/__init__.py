"""llgbridge: the llama.cpp <-> llguidance bridge, ported to Python, and the analyses that audit it.

The modules, by layer, are one map in code, `layout.LAYERS`, which the README's Layout shows
(generated from it; tests/test_layers.py checks every import against it).
"""

import sys

__version__ = "0.1.0"

# jsonschema imports rfc3987_syntax where it is installed (jupyter-events' extra brings it), and
# that compiles 38 Lark grammars on import: 1.5 s in every process that imports nbformat or judges
# a JSON answer (each kernel, each what-if). It serves only the checker of the `iri` formats, and
# nothing here checks formats (`validate` and `iter_errors` without a format checker ignore
# `format`), so no verdict changes; None in sys.modules makes its import fail, as if absent.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
