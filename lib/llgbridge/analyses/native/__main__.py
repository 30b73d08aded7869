"""`python -m llgbridge.analyses.native build`: what `make native` runs."""

from __future__ import annotations

import sys

from .builder import binaries, build_native


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] != ["build"]:
        print("usage: python -m llgbridge.analyses.native build", file=sys.stderr)
        return 2
    print(
        "[native] building common/llguidance.cpp (shipped and with patches/), test-grammar-llguidance, harness ...",
        flush=True,
    )
    st = build_native()
    if st["built"]:
        print(f"[native] built in {st['seconds']} s: {', '.join(b.name for b in binaries())}", flush=True)
    else:
        print(f"[native] not built: {st['reason']}", file=sys.stderr, flush=True)
    return 0  # the report goes on without the native parts, and says why


if __name__ == "__main__":
    raise SystemExit(main())
