"""Run every `guards` test with its bridges swapped (`conftest.variant`); pass only if each fails.

A test that still passes with the bridges swapped does not catch the bug it names. Only an
assertion failure counts as failing "as it must": an exception of any other kind (a missing
fixture, a bridge that cannot be built, a typo) says nothing about the bug, so it fails this
run too, as does a test skipped or erroring in setup.
"""

import os
import sys

import pytest

os.environ["LLGBRIDGE_SWAP_VARIANTS"] = "1"


class Outcomes:
    def __init__(self) -> None:
        self.caught: list[str] = []  # failed on an assertion: the test catches its bug
        self.passed: list[str] = []  # passed with the bridges swapped: it does not
        self.other: list[str] = []  # erred, or was skipped: it shows nothing either way

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):  # noqa: ANN201
        report = (yield).get_result()
        if report.when == "call" and report.passed:
            self.passed.append(item.nodeid)
        elif (
            report.when == "call"
            and report.failed
            and call.excinfo is not None
            and call.excinfo.errisinstance(AssertionError)
        ):
            self.caught.append(item.nodeid)
        elif report.failed or report.skipped:
            self.other.append(f"{item.nodeid} ({report.when}: {report.outcome})")


o = Outcomes()
pytest.main(["-q", "-m", "guards", "--tb=line", "-p", "no:cacheprovider", *sys.argv[1:]], plugins=[o])
print(
    f"\nswapped bridges: {len(o.caught)} guards tests failed on an assertion as they must, {len(o.passed)} still "
    f"passed, {len(o.other)} failed otherwise or were skipped"
)
for n in o.passed:
    print(f"  DOES NOT CATCH ITS BUG: {n}")
for n in o.other:
    print(f"  NOT AN ASSERTION FAILURE: {n}")
sys.exit(0 if o.caught and not o.passed and not o.other else 1)
