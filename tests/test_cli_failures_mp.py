"""Failures with tensor/pipeline parallelism, as docs/model-parallel.md says: a failure run restarts the job on
its layout and reports goodput; stragglers and elastic shrinking are refused with one line naming the key."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from simdist.cli import main

SCENARIO = """
name: mp-failures
cluster:
  nodes:
    - {count: 4, gpu: a100-sxm4-80gb, gpus_per_node: 8, intra_node: nvswitch-a100,
       nic: {bandwidth: "200 Gb/s", latency: "2 us", count: 8, transport: rdma}}
  fabric: {topology: single_switch}
workload: {model: {gpt: {layers: 8, hidden: 1024, heads: 16, vocab: 1000}}, seq_len: 512, global_batch: 48,
           precision: bf16}
training: {parallelism: {tp: 8, pp: 2}, micro_batch: 1}
failures:
  random: {}
  recovery: {policy: checkpoint_restart, checkpoint_interval: "30 min"}
run: {duration: "14 d", fidelity: estimate, replicas: 2}
"""


def _run(tmp_path, *args):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    return CliRunner().invoke(main, [args[0], str(path), *args[1:]])


@pytest.mark.parametrize("policy", ["checkpoint_restart", "in_memory", "spares"])
def test_a_failure_run_with_tp_and_pp_reports_goodput(tmp_path, policy):
    r = _run(tmp_path, "estimate", "--json", "--set", f"failures.recovery.policy={policy}")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    g = data["goodput"]
    assert data["parallelism"]["tp"] == 8 and data["parallelism"]["pp"] == 2 and data["parallelism"]["dp"] == 2
    assert 0.5 < g["ratio"] < 1.0 and g["failures"] > 0
    # the global batch (48: not a multiple of the 32 GPUs) is split over the 2 data-parallel replicas
    assert g["samples_per_s"] == pytest.approx(g["ratio"] * data["throughput"]["samples_per_s"], rel=0.02)


@pytest.mark.parametrize("policy", ["elastic", "replica_groups"])
def test_shrinking_a_model_parallel_job_is_refused(tmp_path, policy):
    for verb in ("estimate", "check"):
        r = _run(tmp_path, verb, "--set", f"failures.recovery.policy={policy}")
        assert r.exit_code == 2
        assert f"failures.recovery.policy: got '{policy}'; expected checkpoint_restart, in_memory or spares" in r.output


def test_a_straggler_with_tp_is_refused_naming_the_event(tmp_path):
    r = _run(tmp_path, "estimate", "--set", 'failures.events=[{at: "1 h", kind: straggler, target: "gpu:3", '
                                              'slowdown: 2.0, duration: "1 h"}]')
    assert r.exit_code == 2
    assert "failures.events.0.kind: got 'straggler'" in r.output and "got '...'" not in r.output
