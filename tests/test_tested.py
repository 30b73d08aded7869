"""What was tested against what the PR is (`report.tested`): the patches' line counts and the
guide's line citations into the tested tree.

The counts are checked against git's own (`git apply --numstat` reads the same patch files), the
citations against two lines read by hand in the vendored tree (`common/llguidance.cpp`:
`llama_sampler_llg_new_tokenizer` is at 139, as the guide says; `llama_sampler_init_llg` at 221,
where the guide says 262).
"""

from __future__ import annotations

import subprocess

import pytest

from llgbridge.analyses.native.builder import SHIPPED, patch_files
from llgbridge.paths import ROOT
from llgbridge.report import tested


def test_the_patches_are_counted_as_git_counts_them() -> None:
    out = subprocess.run(
        ["git", "apply", "--numstat", *map(str, patch_files())], cwd=ROOT, capture_output=True, text=True, check=True
    )
    git: dict[str, list[int]] = {}
    for line in out.stdout.splitlines():
        plus, minus, path = line.split("\t")
        git.setdefault(path, [0, 0])
        git[path][0] += int(plus)
        git[path][1] += int(minus)
    assert {f: [c["+"], c["-"]] for f, c in tested.diffstat().items()} == git
    md = tested.section_markdown()
    total = [sum(x) for x in zip(*git.values())]
    assert f"**+{total[0]} −{total[1]}**" in md and '"4 files, 152 insertions, 13 deletions"' in md


@pytest.mark.skipif(
    not (SHIPPED / "common" / "llguidance.cpp").exists(), reason="the vendored tree is not extracted (make native)"
)
def test_the_guides_citations_are_checked_against_the_tested_tree() -> None:
    got = {(c["citation"].file, c["citation"].lines): (c["holds"], c["here"]) for c in tested.check_citations()}
    assert got[("common/llguidance.cpp", (139, 139))] == (True, "")
    assert got[("common/llguidance.cpp", (262, 262))] == (False, ":221")
