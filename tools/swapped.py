"""Run every `guards` test against the other bridge variant; pass only if each one fails.

A test that still passes with the variants swapped does not catch the bug it names.
"""
import os
import sys

import pytest

os.environ["LLGBRIDGE_SWAP_VARIANTS"] = "1"


class Outcomes:
    def __init__(self) -> None:
        self.passed: list[str] = []
        self.failed: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            (self.passed if report.passed else self.failed).append(report.nodeid)


o = Outcomes()
pytest.main(["-q", "-m", "guards", "--tb=no", "-p", "no:cacheprovider", *sys.argv[1:]], plugins=[o])
print(f"\nswapped variants: {len(o.failed)} guards tests failed as they must, {len(o.passed)} still passed")
for n in o.passed:
    print(f"  DOES NOT CATCH ITS BUG: {n}")
sys.exit(0 if o.failed and not o.passed else 1)
