"""docs/api.md's examples run as written (in order, one namespace, from the repository root)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "api.md"


def _blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_api_doc_has_examples():
    assert len(_blocks(DOC.read_text())) >= 5


def test_api_doc_examples_run(monkeypatch, capsys):
    pytest.importorskip("pandas")
    monkeypatch.chdir(ROOT)
    namespace: dict = {"__name__": "api_doc"}
    for i, block in enumerate(_blocks(DOC.read_text())):
        try:
            exec(compile(block, f"docs/api.md[block {i}]", "exec"), namespace)  # noqa: S102 - our own doc
        except Exception as err:  # noqa: BLE001 - name the block that broke
            raise AssertionError(f"docs/api.md python block {i} failed: {type(err).__name__}: {err}\n{block}") from err
    out = capsys.readouterr().out
    assert "samples/s" in out and "communication.bucket_size" in out


def test_guide_first_scenario_and_api_example_run(tmp_path, monkeypatch):
    """docs/guide.md's first scenario loads and runs, and its Python example runs against it."""
    text = (ROOT / "docs" / "guide.md").read_text()
    first = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)[0]
    (tmp_path / "first.yaml").write_text(first)
    monkeypatch.chdir(tmp_path)
    pytest.importorskip("pandas")
    namespace: dict = {}
    exec(compile(_blocks(text)[0], "docs/guide.md[python]", "exec"), namespace)  # noqa: S102 - our own doc
    result = namespace["result"]
    assert result.gpus == 32 and result.strategy["name"] == "tree"
