"""The text report of `simdist run/estimate` shows what the JSON has: MFU and TFLOP/s per GPU, the pipeline bubble
and tensor-parallel communication, a precision fallback on every line that uses it, grouped link rows."""
from __future__ import annotations

import json
import textwrap

from click.testing import CliRunner

from simdist.cli import main

NODE = """
    - count: {count}
      gpu: {gpu}
      gpus_per_node: 8
      intra_node: {intra}
      nic: {{bandwidth: "200 Gb/s", latency: "2 us", transport: rdma}}"""
A100 = NODE.format(count=2, gpu="a100-sxm4-80gb", intra="nvswitch-a100")
V100 = NODE.format(count=2, gpu="v100-sxm2-32gb", intra="cube-mesh-v100")


def _scenario(tmp_path, nodes: str, workload: str, training: str = "", run: str = "estimate") -> str:
    text = (f"name: t\ncluster:\n  nodes:{nodes}\n  fabric: {{topology: single_switch}}\n"
            f"workload: {workload}\n{training}run: {{iterations: 3, warmup: 1, fidelity: {run}}}\n")
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(text))
    return str(path)


def _run(*args) -> str:
    r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 0, r.output
    return r.output


def _line(text: str, key: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(key))


GPT = '{model: {gpt: {layers: 8, hidden: 1024, heads: 16, vocab: 1000}}, seq_len: 512, global_batch: 16, precision: fp16}'


def test_model_parallel_report_has_mfu_bubble_and_tp(tmp_path):
    path = _scenario(tmp_path, A100, GPT, "training: {parallelism: {tp: 2, pp: 2}, micro_batch: 1, recompute: full}\n")
    text = _run("estimate", path)
    data = json.loads(_run("estimate", path, "--json"))
    assert f"{data['mfu']:.1%}" in _line(text, "MFU")
    tflops = _line(text, "TFLOP/s per GPU")
    assert f"{data['achieved_tflops_per_gpu']:,.1f} with recomputation" in tflops
    model_tflops = data["mfu"] * 312e12 / 1e12  # the A100's dense fp16 peak
    assert f"{model_tflops:,.1f} (model FLOPs)" in tflops
    assert "tp 2 x pp 2 x dp 4" in _line(text, "parallelism")
    assert "16 (4 micro-batches of 1 per pipeline x dp 4)" in _line(text, "global batch")
    bubble = _line(text, "pipeline bubble")
    assert f"{data['breakdown_s']['pipeline_bubble'] / data['iteration_time_s']:.1%}" in bubble
    assert _line(text, "tensor-parallel communication")


def test_data_parallel_report_has_mfu_and_cost(tmp_path):
    path = _scenario(tmp_path, A100, "{model: resnet50, batch_per_gpu: 32, precision: fp16}")
    text = _run("estimate", path)
    data = json.loads(_run("estimate", path, "--json"))
    assert f"{data['mfu']:.1%} of the fp16 peak (312.0 TFLOP/s per GPU)" in _line(text, "MFU")
    assert f"{data['mfu'] * 312:,.1f} (model FLOPs)" in _line(text, "TFLOP/s per GPU")
    assert "pipeline bubble" not in text  # only where there is a pipeline
    assert f"${data['cost']['price_per_hour_usd']:,.2f}/hour" in _line(text, "cost")


def test_precision_fallback_named_wherever_its_figure_is_shown(tmp_path):
    path = _scenario(tmp_path, A100, "{model: resnet50, batch_per_gpu: 32, precision: fp8}")
    text = _run("estimate", path)
    peak = _line(text, "aggregate peak (fp8)")
    assert "a100-sxm4-80gb: no fp8 units, counted at its fp16 peak" in peak
    assert "no fp8 units, counted at its fp16 peak" in _line(text, "MFU")


def test_mixed_cluster_mfu_names_the_mean_peak(tmp_path):
    path = _scenario(tmp_path, A100 + V100, "{model: resnet50, batch_per_gpu: 32, precision: fp16}")
    text = _run("estimate", path)
    assert "mean over the node groups: " in _line(text, "MFU")
    assert "16 x a100-sxm4-80gb, 16 x v100-sxm2-32gb" in _line(text, "gpu models")


def test_mixed_cluster_shows_each_groups_memory(tmp_path):
    from simdist.strategies.rank_memory import memory_by_group
    from simdist.io.load import load_scenario
    from simdist.units import format_memory

    path = _scenario(tmp_path, A100 + V100, "{model: resnet50, batch_per_gpu: 32, precision: fp16}",
                     "training: {batch_split: proportional}\n")
    text = _run("estimate", path)
    groups = memory_by_group(load_scenario(path))
    a100, v100 = groups[0], groups[1]
    assert a100.total_bytes > v100.total_bytes  # the faster group computes the larger share of the batch
    assert f"{format_memory(a100.total_bytes)} of 80 GiB" in _line(text, "0: a100-sxm4-80gb")
    assert f"{format_memory(v100.total_bytes)} of 32 GiB" in _line(text, "1: v100-sxm2-32gb")
    assert "on the tightest node group" in _line(text, "memory per GPU")


def test_identical_links_are_one_row():
    from simdist.report import link_rows
    from simdist.results.records import LinkUtilization

    links = [LinkUtilization(f"leaf0->node{i}/nic{j}", 0.012) for i in range(2) for j in range(4)]
    links += [LinkUtilization("leaf1->spine0", 0.012), LinkUtilization("node0/nic0->leaf0", 0.011)]
    rows = link_rows(links)
    assert rows == [["leaf0->node0/nic0", "1.2%", "x 8 (leaf#->node#/nic#)"], ["leaf1->spine0", "1.2%", "-"],
                    ["node0/nic0->leaf0", "1.1%", "-"]]


def test_catalog_gpus_fits_a_terminal_and_json_keeps_every_column():
    text = _run("catalog", "gpus")
    assert max(len(line) for line in text.splitlines()) <= 120
    assert "a100-sxm4-80gb" in text and "312" in text
    rows = json.loads(_run("catalog", "gpus", "--json"))
    assert {"price basis", "name", "vendor"} <= set(rows[0])


def test_benchmark_table_explains_its_algorithm_names():
    from pathlib import Path

    text = _run("estimate", str(Path(__file__).resolve().parents[1] / "scenarios/examples/sharp-dgxa100.yaml"))
    assert "collnet_direct/Simple" in text
    assert "  collnet_direct: CollNet Direct: SHARP reduction in the fabric switches" in text
