"""`simdist topo FILE --heatmap PATH`: the topology drawn with the simulated link utilisation (plots.link_heatmap)."""
from __future__ import annotations

from pathlib import Path

import matplotlib.figure
import pytest
from click.testing import CliRunner

import simdist
from simdist.cli import main

ROOT = Path(__file__).resolve().parents[1]
FILE = str(ROOT / "scenarios" / "default.yaml")


def _spy(monkeypatch) -> list:
    seen, real = [], matplotlib.figure.Figure.savefig

    def spy(fig, path, *a, **k):
        seen.append(fig)
        return real(fig, path, *a, **k)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
    return seen


@pytest.mark.parametrize("ext", ["png", "svg"])
def test_topo_heatmap_renders_the_simulated_links(tmp_path, monkeypatch, ext):
    seen = _spy(monkeypatch)
    path = tmp_path / f"heat.{ext}"
    # run.fidelity=estimate: the heatmap simulates anyway (the closed forms give no per-link load)
    out = CliRunner().invoke(main, ["topo", FILE, "--set", "run.fidelity=estimate", "--heatmap", str(path)])
    assert out.exit_code == 0, out.output
    links = simdist.simulate(FILE, fidelity="simulate").links
    assert links and f"heatmap of the {len(links)} busiest links (simulated): {path}" in out.output
    assert path.stat().st_size > 1000
    head = path.read_bytes()[:64]
    assert head.startswith(b"\x89PNG") if ext == "png" else b"<svg" in path.read_bytes()[:2000]
    (fig,) = seen
    ax = fig.axes[0]
    assert ax.get_title().startswith("link utilisation on") and ax.get_legend() is not None
    assert any("utilisation (%" in a.get_ylabel() for a in fig.axes[1:])
    hot = [c for c in ax.collections if c.get_array() is not None and len(c.get_array())]
    assert max(hot[0].get_array()) == pytest.approx(100 * max(lk.utilization for lk in links))


def test_topo_heatmap_bad_extension_is_one_line_before_any_work(tmp_path):
    out = CliRunner().invoke(main, ["topo", FILE, "--heatmap", str(tmp_path / "heat.jpg")])
    assert out.exit_code == 1 and "expected a .png or .svg" in out.output
    assert not (tmp_path / "heat.jpg").exists()


def test_topo_json_with_heatmap_prints_only_the_summary(tmp_path):
    import json

    out = CliRunner().invoke(main, ["topo", FILE, "--json", "--heatmap", str(tmp_path / "h.png")])
    assert out.exit_code == 0, out.output
    assert "gpus" in json.dumps(json.loads(out.output)).lower() and (tmp_path / "h.png").exists()
