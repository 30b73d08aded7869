"""Write a clean notebook (no outputs) from a list of cells: `python tools/mknb.py OUT.ipynb < cells.py`.

Cells are separated by lines `# %%` (code) or `# %% [markdown]`; a code cell whose first line is
`# parameters` gets papermill's `parameters` tag.
"""
import json
import sys

def cells_from(text):
    cells, kind, buf = [], None, []
    def flush():
        if kind is None:
            return
        src = "\n".join(buf).strip("\n")
        if kind == "markdown":
            src = "\n".join(l[2:] if l.startswith("# ") else l.lstrip("#") for l in src.splitlines())
            cells.append({"cell_type": "markdown", "metadata": {}, "source": src.splitlines(True)})
        else:
            meta = {"tags": ["parameters"]} if src.startswith("# parameters") else {}
            cells.append({"cell_type": "code", "execution_count": None, "metadata": meta, "outputs": [], "source": src.splitlines(True)})
    for line in text.splitlines():
        if line.startswith("# %%"):
            flush()
            kind, buf = ("markdown" if "[markdown]" in line else "code"), []
        else:
            buf.append(line)
    flush()
    return cells

nb = {
    "cells": cells_from(sys.stdin.read()),
    "metadata": {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    },
    "nbformat": 4,
    "nbformat_minor": 5,
}
for i, c in enumerate(nb["cells"]):
    c["id"] = f"cell-{i}"
with open(sys.argv[1], "w") as f:
    json.dump(nb, f, indent=1, ensure_ascii=False)
    f.write("\n")
