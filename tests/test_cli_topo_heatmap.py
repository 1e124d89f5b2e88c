"""`simdist topo FILE --heatmap PATH`: the topology drawn with the simulated link utilisation (plots.link_heatmap)."""
from __future__ import annotations

from pathlib import Path

from matplotlib.collections import LineCollection
import pytest
from click.testing import CliRunner

import simdist
from simdist.cli import main

ROOT = Path(__file__).resolve().parents[1]
FILE = str(ROOT / "scenarios" / "default.yaml")


@pytest.mark.parametrize("ext", ["png", "svg"])
def test_topo_heatmap_renders_the_simulated_links(tmp_path, drawn, ext):
    seen = drawn
    path = tmp_path / f"heat.{ext}"
    # run.fidelity=estimate: the heatmap simulates anyway (the closed forms give no per-link load)
    out = CliRunner().invoke(main, ["topo", FILE, "--set", "run.fidelity=estimate", "--heatmap", str(path)])
    assert out.exit_code == 0, out.output
    links = simdist.simulate(FILE, fidelity="simulate").links
    assert "heatmap of every link (" in out.output and f"carried traffic) (simulated): {path}" in out.output
    assert path.stat().st_size > 1000
    head = path.read_bytes()[:64]
    assert head.startswith(b"\x89PNG") if ext == "png" else b"<svg" in path.read_bytes()[:2000]
    (fig,) = seen
    ax = fig.axes[0]
    assert ax.get_title().startswith("link utilisation on")
    assert any("utilisation (%" in a.get_ylabel() for a in fig.axes[1:])
    hot = [c for c in ax.collections if c.get_array() is not None and len(c.get_array())]
    assert max(hot[0].get_array()) == pytest.approx(100 * max(lk.utilization for lk in links), abs=1e-4)  # rows: 6 digits
    # every link is coloured: the 16 nodes' uplinks and the 4 x 32 leaf-spine links, none left grey
    assert len(hot) == 1 and len(hot[0].get_array()) == 16 + 4 * 32
    assert not [c for c in ax.collections if isinstance(c, LineCollection) and c.get_array() is None]


def test_heatmap_of_a_result_colours_only_its_links_and_greys_the_rest(tmp_path, drawn):
    from simdist.io.load import load_scenario
    from simdist.plots import link_heatmap
    from simdist.report import cluster_summary

    seen = drawn
    _, topology = cluster_summary(load_scenario(FILE))
    result = simdist.simulate(FILE, fidelity="simulate")
    link_heatmap(topology, result.links, str(tmp_path / "h.png"))
    ax = seen[0].axes[0]
    grey = [c for c in ax.collections if isinstance(c, LineCollection) and c.get_array() is None]
    assert grey and grey[0].get_label() == "not among the reported links" and ax.get_legend() is not None


def test_topo_heatmap_bad_extension_is_one_line_before_any_work(tmp_path):
    out = CliRunner().invoke(main, ["topo", FILE, "--heatmap", str(tmp_path / "heat.jpg")])
    assert out.exit_code == 1 and "expected a .png or .svg" in out.output
    assert not (tmp_path / "heat.jpg").exists()


def test_topo_json_with_heatmap_prints_only_the_summary(tmp_path):
    import json

    out = CliRunner().invoke(main, ["topo", FILE, "--json", "--heatmap", str(tmp_path / "h.png")])
    assert out.exit_code == 0, out.output
    assert "gpus" in json.dumps(json.loads(out.output)).lower() and (tmp_path / "h.png").exists()
