"""llgbridge: the llama.cpp <-> llguidance bridge, ported to Python, and the analyses that audit it.

The modules, by layer, are the README's Layout: the one map (tests/test_layers.py checks every
import against it).
"""

__version__ = "0.1.0"
