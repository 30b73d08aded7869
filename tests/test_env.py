"""pyproject.toml and environment.yml pin the same releases."""

import re
import tomllib

from llgbridge.paths import ROOT


def _pins_pyproject() -> dict[str, str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return dict(d.split("==") for d in deps)


def _pins_environment() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "environment.yml").read_text().splitlines():
        m = re.match(r"\s*-\s*([A-Za-z0-9_.-]+)==(\S+)\s*$", line)
        if m:
            pins[m.group(1)] = m.group(2)
    return pins


def test_every_dependency_is_pinned_exactly() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert all("==" in d for d in deps), [d for d in deps if "==" not in d]


def test_environment_yml_matches_pyproject() -> None:
    assert _pins_environment() == _pins_pyproject()
