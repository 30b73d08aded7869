"""A literal as the command line gives it (argv[1]), parsed and checked as `run -p literal`
takes it, printed with `ascii`: a test runs this under a C locale.

    python tests/programs/parse_literal.py TEXT
"""

from __future__ import annotations

import sys

from llgbridge import params as P

value = P.parse_value(sys.argv[1])
P.check("forced", {"literal": value})
print(ascii(value))
