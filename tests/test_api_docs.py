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
