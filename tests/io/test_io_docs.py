"""docs/scenario.md lists every schema key with the generated kind and default; every field has a description."""
from __future__ import annotations

from pathlib import Path

from simdist.io.reference import keys, markdown_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "scenario.md"


def test_docs_key_table_matches_the_schema():
    text = DOC.read_text()
    begin, end = "<!-- keys:begin -->\n", "<!-- keys:end -->"
    table = text[text.index(begin) + len(begin): text.index(end)]
    assert table == markdown_table(), "regenerate the table with simdist.io.reference.markdown_table()"


def test_every_key_has_a_description_and_design_keys_are_present():
    docs = keys()
    assert all(k.description for k in docs), [k.path for k in docs if not k.description]
    paths = {k.path for k in docs}
    for design_key in ["cluster.nodes[].count", "cluster.nodes[].gpu", "cluster.nodes[].gpus_per_node",
                       "cluster.nodes[].intra_node", "cluster.nodes[].nic.count", "cluster.nodes[].nic.transport",
                       "cluster.fabric.topology", "cluster.fabric.nodes_per_leaf", "cluster.fabric.oversubscription",
                       "cluster.fabric.link", "workload.model", "workload.batch_per_gpu", "workload.global_batch",
                       "workload.precision", "workload.seq_len", "workload.grad_dtype", "workload.benchmark.op",
                       "workload.benchmark.sizes", "training.parallelism.dp", "training.parallelism.zero",
                       "training.micro_batch", "training.schedule", "training.sync", "training.staleness",
                       "training.local_steps", "training.grad_accumulation", "training.batch_split",
                       "communication.strategy", "communication.backend", "communication.hierarchical.intra",
                       "communication.ps.servers", "communication.ps.placement", "communication.bucket_size",
                       "communication.overlap", "communication.compression.method",
                       "communication.compression.error_feedback", "failures.events[].at",
                       "failures.events[].kind", "failures.events[].target", "failures.events[].factor",
                       "failures.events[].duration", "failures.events[].slowdown", "failures.random.gpu_mtbf",
                       "failures.random.repair", "failures.recovery.policy", "failures.recovery.checkpoint_interval",
                       "failures.recovery.checkpoint_write", "failures.recovery.restart", "run.iterations",
                       "run.duration", "run.warmup", "run.seed", "run.replicas", "run.fidelity", "calibration",
                       "name"]:
        assert design_key in paths, design_key


def test_defaults_match_the_resolved_dataclasses():
    """The documented defaults are what resolution produces (scenario.py's defaults)."""
    from simdist.scenario import CommunicationSpec, RecoverySpec, RunSpec, TrainingSpec

    by_path = {k.path: k.default for k in keys()}
    assert by_path["communication.bucket_size"] == "'25 MB'" and CommunicationSpec().bucket_size_bytes == 25e6
    assert by_path["run.iterations"] == str(RunSpec().iterations)
    assert by_path["run.warmup"] == str(RunSpec().warmup)
    assert by_path["training.schedule"] == TrainingSpec().schedule.value
    assert by_path["failures.recovery.restart"] == "'5 min'" and RecoverySpec().restart_s == 300.0


def test_the_generator_rewrites_a_drifted_table_and_check_fails_on_it(tmp_path, capsys):
    from simdist.io.reference import main, render

    assert render(DOC.read_text()) == DOC.read_text()  # the shipped doc is what the generator writes
    drifted = tmp_path / "scenario.md"
    drifted.write_text(DOC.read_text().replace("| `run.seed` |", "| `run.sead` |"))
    assert main(["--check", str(drifted)]) == 1
    assert "out of date" in capsys.readouterr().out
    assert main([str(drifted)]) == 0
    assert drifted.read_text() == DOC.read_text()
    assert main(["--check", str(drifted)]) == 0


def test_quantities_have_their_units_and_other_keys_none():
    by_path = {k.path: k for k in keys()}
    assert by_path["communication.bucket_size"].unit.startswith("B (bytes) or b (bits)")
    assert by_path["cluster.nodes[].nic.bandwidth"].unit.startswith("B/s or b/s")
    assert "min" in by_path["failures.recovery.checkpoint_interval"].unit
    assert by_path["run.iterations"].unit == by_path["communication.strategy"].unit == "-"
