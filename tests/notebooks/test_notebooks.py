"""The notebooks: stored without outputs, using only the API and simdist.plots, and executing cleanly.

Executing them is `slow` (about 5 minutes on 2 cores); `make test` and CI run it. Each notebook's last
cell asserts that its prose conclusion matches its numbers, so a run that passes checks the prose too.
"""
from __future__ import annotations

import ast
import json

import pytest

from tests.notebooks.run import NOTEBOOKS, execute, notebooks

EXPECTED = ["01-quickstart.ipynb", "02-strategies.ipynb", "03-compression.ipynb", "04-oversubscription.ipynb",
            "05-validation.ipynb", "06-heterogeneous.ipynb", "07-failures-goodput.ipynb",
            "08-planner.ipynb", "09-cp-ep.ipynb", "09-model-parallel.ipynb"]
ALLOWED_IMPORTS = {"simdist", "simdist.plots", "numpy", "pandas", "json", "pathlib", "tempfile"}


def _cells(path):
    return json.loads(path.read_text())["cells"]


def test_the_notebooks_are_there():
    assert [p.name for p in notebooks()] == EXPECTED


@pytest.mark.parametrize("name", EXPECTED)
def test_stored_without_outputs(name):
    for cell in _cells(NOTEBOOKS / name):
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, f"{name}: strip the outputs"


@pytest.mark.parametrize("name", EXPECTED)
def test_only_the_api_and_plots(name):
    """No model logic in a notebook: it imports simdist (the API), simdist.plots and data tools only."""
    imported = set()
    for cell in _cells(NOTEBOOKS / name):
        if cell["cell_type"] != "code":
            continue
        source = "\n".join(line for line in "".join(cell["source"]).splitlines() if not line.startswith("%"))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                imported |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                imported |= {f"{node.module}.{a.name}" if node.module == "simdist" else node.module for a in node.names}
    assert imported <= ALLOWED_IMPORTS, imported - ALLOWED_IMPORTS
    last_code = [c for c in _cells(NOTEBOOKS / name) if c["cell_type"] == "code"][-1]
    assert "assert" in "".join(last_code["source"]), f"{name}: the last cell checks the conclusion"


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_executes(name, tmp_path):
    pytest.importorskip("nbclient")
    pytest.importorskip("pandas")
    nb = execute(NOTEBOOKS / name, tmp_path)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [o for o in outputs if "image/png" in o.get("data", {})]
    assert figures, f"{name} drew no figure"
