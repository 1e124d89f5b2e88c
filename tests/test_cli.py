"""The CLI as users meet it: exit codes, one-line errors naming the key, deterministic JSON."""
from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from simdist.cli import main

BASE = """
name: t
cluster:
  nodes:
    - count: 2
      gpu: a100-sxm4-80gb
      gpus_per_node: 8
      intra_node: nvswitch-a100
      nic: {bandwidth: "200 Gb/s", latency: "2 us", transport: rdma}
  fabric: {topology: single_switch}
workload:
  benchmark: {op: all_reduce, sizes: ["1 MB", "64 MB"]}
"""


def _write(tmp_path, text, name="s.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return str(p)


def _run(*args):
    return CliRunner().invoke(main, list(args))


def test_version():
    r = _run("--version")
    assert r.exit_code == 0 and "simdist" in r.output


def test_run_benchmark_table_and_json(tmp_path):
    f = _write(tmp_path, BASE)
    r = _run("run", f)
    assert r.exit_code == 0, r.output
    assert "busbw" in r.output
    a = _run("run", f, "--json")
    b = _run("run", f, "--json")
    assert a.exit_code == 0 and a.output == b.output  # byte-identical
    data = json.loads(a.output)
    assert [row["size_bytes"] for row in data["collectives"]] == [1e6, 64e6]
    assert data["gpus"] == 16


@pytest.mark.parametrize("mutation, key", [
    (("  benchmark:", "  benchmrk:"), "workload.benchmrk"),
    (('"200 Gb/s"', '"200Gbps"'), "cluster.nodes.0.nic.bandwidth"),
    (("a100-sxm4-80gb", "a100-sxm9"), "cluster.nodes.0.gpu"),
    (("nvswitch-a100", "nvswitch-z9"), "cluster.nodes.0.intra_node"),
    (("count: 2", "count: 0"), "cluster.nodes.0.count"),
    (("count: 2", "count: -3"), "cluster.nodes.0.count"),
    (("gpus_per_node: 8", "gpus_per_node: eight"), "cluster.nodes.0.gpus_per_node"),
    (('"1 MB", "64 MB"', '"1 MB", "-64 MB"'), "workload.benchmark.sizes"),
    (("{topology: single_switch}", "{topology: torus2d, dims: [1, 1]}"), "cluster.fabric"),
])
def test_malformed_scenarios_exit_2_with_the_key(tmp_path, mutation, key):
    f = _write(tmp_path, BASE.replace(*mutation))
    r = _run("run", f)
    assert r.exit_code == 2, r.output
    assert key in r.output
    assert "Traceback" not in r.output


def test_missing_file_and_broken_yaml(tmp_path):
    r = _run("run", str(tmp_path / "nope.yaml"))
    assert r.exit_code == 2 and "Traceback" not in r.output
    f = _write(tmp_path, "name: [unclosed\n")
    r = _run("check", f)
    assert r.exit_code == 2 and "line" in r.output and "Traceback" not in r.output


def test_check_lists_every_error_at_once(tmp_path):
    text = BASE.replace('"200 Gb/s"', '"200Gbps"').replace("a100-sxm4-80gb", "a100-sxm9").replace("count: 2", "count: 0")
    r = _run("check", _write(tmp_path, text))
    assert r.exit_code == 2
    for key in ("cluster.nodes.0.nic.bandwidth", "cluster.nodes.0.gpu", "cluster.nodes.0.count"):
        assert key in r.output


def test_check_ok_files(tmp_path):
    r = _run("check", _write(tmp_path, BASE))
    assert r.exit_code == 0 and "ok" in r.output


def test_set_override(tmp_path):
    f = _write(tmp_path, BASE)
    r = _run("run", f, "--json", "--set", "cluster.nodes.0.count=4")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["gpus"] == 32
    r = _run("run", f, "--set", "communication.strategy=rign")
    assert r.exit_code == 2 and "communication.strategy" in r.output


def test_infeasible_memory_exits_3(tmp_path):
    text = """
    name: too-big
    cluster:
      nodes:
        - {count: 1, gpu: v100-sxm2-16gb, gpus_per_node: 1, intra_node: pcie-gen3,
           nic: {bandwidth: "100 Gb/s"}}
      fabric: {topology: single_switch}
    workload: {model: gpt3-175b, batch_per_gpu: 1, precision: fp16}
    """
    r = _run("run", _write(tmp_path, text))
    assert r.exit_code == 3, r.output
    assert "v100-sxm2-16gb" in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("kind", ["gpus", "links", "topologies", "intra_node", "models"])
def test_catalog(kind):
    r = _run("catalog", kind)
    assert r.exit_code == 0, r.output
    assert len(r.output.splitlines()) > 3


def test_topo_draws(tmp_path):
    out = tmp_path / "topo.png"
    r = _run("topo", _write(tmp_path, BASE), "--out", str(out))
    assert r.exit_code == 0, r.output
    assert out.stat().st_size > 1000
    assert "bisection" in r.output


def test_run_out_dir_for_training(tmp_path):
    text = BASE.replace('benchmark: {op: all_reduce, sizes: ["1 MB", "64 MB"]}',
                        "model: resnet50\n  batch_per_gpu: 32\n  precision: fp16")
    out = tmp_path / "res"
    r = _run("run", _write(tmp_path, text), "--out", str(out), "--set", "run.iterations=4", "--set", "run.warmup=1")
    assert r.exit_code == 0, r.output
    assert {p.name for p in out.iterdir()} == {"result.json", "iterations.csv", "trace.json"}
    data = json.loads((out / "result.json").read_text())
    assert data["throughput"]["samples_per_s"] > 0
    trace = json.loads((out / "trace.json").read_text())
    assert any(e.get("ph") == "X" for e in trace["traceEvents"])
    tracks = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    assert {f"gpu:{i}" for i in range(16)} <= tracks  # one track per GPU
    assert any(t.startswith("link:") for t in tracks)  # and per busy link


def test_compare_breakeven(tmp_path):
    text = BASE.replace('benchmark: {op: all_reduce, sizes: ["1 MB", "64 MB"]}',
                        "model: resnet50\n  batch_per_gpu: 32\n  precision: fp16")
    plot = tmp_path / "be.png"
    r = _run("compare", _write(tmp_path, text), "--bandwidths", "1 Gb/s,100 Gb/s", "--methods", "fp16,topk:0.01",
             "--plot", str(plot))
    assert r.exit_code == 0, r.output
    assert "fp16" in r.output and "topk" in r.output
    assert plot.stat().st_size > 1000
    r = _run("compare", _write(tmp_path, text), "--methods", "zip9")
    assert r.exit_code == 2 and "Traceback" not in r.output
