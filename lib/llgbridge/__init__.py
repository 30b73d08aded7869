"""llgbridge: the llama.cpp <-> llguidance bridge, ported to Python, and the analyses that audit it.

Modules, one concern each:
- `llg`: ctypes binding to llguidance's C API (from its wheel);
- `vocab`: a llama.cpp vocab through llama-cpp-python (`token_to_piece`, `detokenize`, `tokenize`);
- `bridges`: the bridge variants (`upstream`, `fixed`) behind one interface;
- `census`: the byte-diff census (guide 4.2, 4.3);
- `fixtures`, `run`, `report`: fetch fixtures, execute notebooks, gather the report.
"""

__version__ = "0.1.0"
