"""`simdist check` says what `simdist run` says: the same exit code and the same lines for a refused scenario
(exit 2), and the same memory line for one that does not fit (exit 3); a scenario check passes runs.

Cases: every refusal the every-key test knows, and generated scenarios (hypothesis, derandomized) across sync
modes, strategies, tp / pp / ZeRO, batch splits, compression, failures, replicas and benchmark keys on small
clusters, run at estimate fidelity.
"""
from __future__ import annotations

import copy
import re

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simdist.cli import main
from simdist.io.overrides import set_path
from tests.engine.test_every_key import BENCH, CASES, STRAGGLER as STRAGGLER_RUN, TRAIN, _resolve

REAL_CATALOGS = True  # conftest: the real catalogs (the scenarios name real hardware)
MEMORY = "does not fit in GPU memory"
EXAMPLES = 3000  # generated scenarios checked and run (a fixed number; derandomized by tests/conftest.py)


def _lines(text: str, prefix: str) -> list[str]:
    """stderr lines without the verb's prefix (check: 'FILE: ', run: 'error: ')."""
    return [line[len(prefix):] if line.startswith(prefix) else line for line in text.splitlines() if line]


def check_and_run(data: dict, path) -> tuple[tuple[int, list[str]], tuple[int, list[str]]]:
    """(exit code, lines) of `simdist check` and of `simdist run --json` on `data` written to `path`."""
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    runner = CliRunner()
    checked = runner.invoke(main, ["check", str(path)])
    ran = runner.invoke(main, ["run", str(path), "--json"])
    assert ran.exit_code in (0, 2, 3), f"run: exit {ran.exit_code}: {ran.output}{ran.exception!r}"
    assert checked.exit_code in (0, 2, 3), f"check: exit {checked.exit_code}: {checked.output}{checked.exception!r}"
    return (checked.exit_code, _lines(checked.stderr, f"{path}: ")), (ran.exit_code, _lines(ran.stderr, "error: "))


def assert_check_equals_run(data: dict, path) -> None:
    (check_code, check_lines), (run_code, run_lines) = check_and_run(data, path)
    if run_code == 2 or check_code == 2:
        assert (check_code, check_lines) == (run_code, run_lines)
    elif run_code == 3 and run_lines[0].startswith(MEMORY) or check_code == 3:  # run may add hints below the line
        assert check_code == run_code and check_lines and run_lines[:len(check_lines)] == check_lines
    else:  # ran, or infeasible beyond memory (a fabric cut in two): check cannot know that without simulating
        assert check_code == 0 and check_lines == [], (check_lines, run_lines)


REFUSED = sorted(k for k, case in CASES.items() if case[3] not in ("changes", "same"))
UNREAD = [(BENCH, {"training.optimizer": "adam"}), (BENCH, {"communication.overlap": False}),
          (BENCH, {"run.iterations": 5}), (BENCH, {"workload.grad_dtype": "fp16"}), (BENCH, STRAGGLER_RUN),
          (TRAIN, {"training.staleness": 2, "training.local_steps": 4}), (TRAIN, {"communication.ps": {"servers": 4}}),
          (TRAIN, {"communication.hierarchical": {"inter": "tree"}}),
          (TRAIN, {**STRAGGLER_RUN, "failures.recovery": {"restart": "1 min"}}),
          (TRAIN, {"failures": {"random": {"repair": "1 h"}}}),
          (TRAIN, {"training.cp_comm_type": "a2a"}),  # tests/io/test_relevance.py's refusals; cp_comm_type without cp
          (TRAIN, {"training.moe_load_imbalance": 2.0}), (TRAIN, {"training.parallelism.ep": 2})]  # without MoE


def _refused(base: dict, changes: dict, tmp_path) -> None:
    data = copy.deepcopy(base)
    for dotted, value in changes.items():
        set_path(data, dotted.split("."), copy.deepcopy(value))
    (check_code, check_lines), (run_code, run_lines) = check_and_run(data, tmp_path / "s.yaml")
    assert run_code == 2
    assert (check_code, check_lines) == (run_code, run_lines)


@pytest.mark.parametrize("key", REFUSED)
def test_every_key_refusal_is_checked(key, tmp_path):
    base, context, change, _ = CASES[key]
    _refused(base, {**_resolve(tmp_path, context), **_resolve(tmp_path, change)}, tmp_path)


@pytest.mark.parametrize("base, changes", UNREAD)
def test_every_unread_key_refusal_is_checked(base, changes, tmp_path):
    _refused(base, changes, tmp_path)


# ----------------------------------------------------------------------------- generated scenarios

GPT = {"gpt": {"layers": 4, "hidden": 128, "heads": 4, "vocab": 1000}}
ODD_GPT = {"gpt": {"layers": 3, "hidden": 96, "heads": 3, "vocab": 1000}}  # heads and widths not split by 2
MLP = {"layers": [{"name": "fc1", "kind": "linear", "params": 1000000, "fwd_flops": 2000000},
                  {"name": "fc2", "kind": "linear", "params": 1000000, "fwd_flops": 2000000}], "name": "mlp"}
MODELS = {"gpt": GPT, "odd_gpt": ODD_GPT, "mlp": MLP, "gpt2-xl": "gpt2-xl"}  # gpt2-xl: too big for some batches
GPUS = ("v100-sxm2-32gb", "a100-sxm4-80gb")
STRATEGIES = ("ring", "tree", "halving_doubling", "ps", "hierarchical")
SYNCS = ("bsp", "asp", "ssp", "local_sgd", "hybrid")
CODECS = ({"method": "topk", "ratio": 0.01}, {"method": "powersgd", "rank": 2}, {"method": "int8"})
WRONG_CODECS = ({"method": "topk"}, {"method": "fp16", "ratio": 0.1}, {"method": "int8", "error_feedback": False},
                {"method": "randomk", "ratio": 0.1, "rank": 2})
STRAGGLER = {"at": "0 s", "kind": "straggler", "target": "gpu:0", "slowdown": 1.5}
NODE_DOWN = {"at": "10 min", "kind": "node_down", "target": "node:0"}
LINK_DEGRADE = {"at": "10 min", "kind": "link_degrade", "target": "link:leaf0-spine0", "factor": 0.5,
                "duration": "5 min"}


def _node(count: int, gpu: str, per_node: int) -> dict:
    return {"count": count, "gpu": gpu, "gpus_per_node": per_node, "intra_node": {"link": "nvlink2"},
            "nic": {"bandwidth": "100 Gb/s", "latency": "5 us", "transport": "rdma"}}


def _wild(draw) -> bool:
    """One time in six a choice ignores its context (the refusals); otherwise it fits it (the runs)."""
    return draw(st.integers(0, 5)) == 0


@st.composite
def scenarios(draw) -> dict:
    """A small scenario: mostly one that runs, and about half the time with a key the engine refuses there."""
    per_node = draw(st.sampled_from((1, 2, 4)))
    nodes = [_node(draw(st.sampled_from((1, 2))), draw(st.sampled_from(GPUS)), per_node)]
    if draw(st.integers(0, 9)) == 0:  # a second GPU kind
        nodes.append(_node(1, GPUS[1] if nodes[0]["gpu"] == GPUS[0] else GPUS[0], per_node))
    gpus = sum(n["count"] for n in nodes) * per_node
    data: dict = {"name": "gen", "cluster": {"nodes": nodes, "fabric": {"topology": "single_switch"}},
                  "run": {"iterations": 3, "warmup": 1, "fidelity": "estimate"}}
    comm: dict = {"strategy": draw(st.sampled_from(STRATEGIES))}
    if comm["strategy"] == "ps":
        comm["ps"] = {"servers": draw(st.sampled_from((1, 2))),
                      "placement": draw(st.sampled_from(("colocated", "dedicated", "host")))}
        if comm["ps"]["placement"] == "host" and not _wild(draw):
            comm["ps"]["server"] = "cpu"
    data["communication"] = comm
    if draw(st.integers(0, 7)) == 0:  # a collective benchmark, sometimes with training or bucket keys
        data["workload"] = {"benchmark": {"op": draw(st.sampled_from(("all_reduce", "all_gather"))),
                                          "sizes": ["1 MB"]}}
        data["run"] = {"fidelity": "estimate"}
        if _wild(draw):
            data["training"] = {"sync": draw(st.sampled_from(SYNCS))}
        if _wild(draw):
            comm["bucket_size"] = "4 MB"
        return data
    model = draw(st.sampled_from(sorted(MODELS) + ["gpt2-xl"]))
    workload: dict = {"model": copy.deepcopy(MODELS[model]), "precision": draw(st.sampled_from(("fp16", "fp32")))}
    if model != "mlp":
        workload["seq_len"] = 1024 if model == "gpt2-xl" else 64
    if draw(st.booleans()):
        workload["batch_per_gpu"] = draw(st.sampled_from((1, 2, 4, 8, 16)))
    else:
        workload["global_batch"] = gpus * draw(st.sampled_from((2, 4))) if not _wild(draw) else 6
    if draw(st.integers(0, 7)) == 0:  # the host CPU feeding the GPUs
        workload["input_pipeline"] = {"workers_per_gpu": 2, "host_cores": draw(st.sampled_from((2, 8))),
                                      "cpu_per_sample": "4 ms"}
    if draw(st.integers(0, 9)) == 0 and (model != "gpt2-xl" or _wild(draw)):
        workload["single_gpu_throughput"] = draw(st.sampled_from((50, 500)))
    if draw(st.integers(0, 29)) == 0:  # no conv model here: refused
        workload["memory_format"] = "nchw"
    data["workload"] = workload
    ps = comm["strategy"] == "ps"
    syncs = SYNCS if _wild(draw) else (("bsp", "asp", "ssp", "hybrid") if ps else ("bsp", "local_sgd"))
    training: dict = {"sync": draw(st.sampled_from(syncs))}
    if training["sync"] == "ssp" or _wild(draw):
        training["staleness"] = draw(st.sampled_from((0, 2)))
    if training["sync"] == "local_sgd" or _wild(draw):
        training["local_steps"] = draw(st.sampled_from((1, 2)))
    if training["sync"] == "hybrid" and not _wild(draw):
        training["hybrid_switch"] = draw(st.sampled_from((1, 2, "50%")))
    parallelism = {"tp": 1, "pp": 1, "zero": 0}
    kinds = ("dp", "dp", "zero") + (("tp", "pp") if gpus % 2 == 0 else ()) + (("tp_pp",) if gpus % 4 == 0 else ())
    kind = draw(st.sampled_from(("dp", "zero", "tp", "pp", "tp_pp") if _wild(draw) else kinds))
    if kind != "dp" and not _wild(draw):  # tp, pp and ZeRO: a transformer, bsp over ring
        workload["model"], workload["seq_len"] = copy.deepcopy(GPT), 64
        training = {"sync": "bsp"}
        data["communication"] = comm = {"strategy": "ring"}
    if kind == "zero":
        parallelism["zero"] = draw(st.sampled_from((1, 2, 3)))
    if kind in ("tp", "tp_pp"):
        parallelism["tp"] = draw(st.sampled_from((2, 3) if _wild(draw) else (2,)))
    if kind in ("pp", "tp_pp"):
        parallelism["pp"] = 2
    if _wild(draw):
        parallelism["dp"] = draw(st.sampled_from((1, 2, 4)))
    training["parallelism"] = parallelism
    if _wild(draw):
        training["micro_batch"] = draw(st.sampled_from((1, 2, 3)))
    if parallelism["pp"] > 1 and draw(st.booleans()):
        training["schedule"] = draw(st.sampled_from(("gpipe", "1f1b", "interleaved")))
        if training["schedule"] == "interleaved":
            training["virtual_stages"] = 2
    mp = kind in ("tp", "pp", "tp_pp")
    if draw(st.integers(0, 3)) == 0 and (not mp or _wild(draw)):
        training["batch_split"] = draw(st.sampled_from(("proportional", "dynamic")))
    if draw(st.integers(0, 4)) == 0:
        training["grad_accumulation"] = 2
    if draw(st.integers(0, 5)) == 0 and (kind != "dp" or _wild(draw)):
        training["recompute"] = "full"
    data["training"] = training
    if draw(st.integers(0, 4)) == 0 and (kind == "dp" or _wild(draw)):
        comm["compression"] = copy.deepcopy(draw(st.sampled_from(CODECS + (WRONG_CODECS if _wild(draw) else ()))))
    if _wild(draw) and _wild(draw):
        comm["fusion_cycle"] = "5 ms"
    if _wild(draw) and _wild(draw):
        comm["bucket_size"] = "4 MB"
    failures = draw(st.sampled_from((None, None, None, "straggler", "node_down", "link_degrade")))
    if mp and not _wild(draw):
        failures = None
    if failures == "straggler":
        data["failures"] = {"events": [dict(STRAGGLER)]}
    elif failures is not None:
        data["failures"] = {"events": [dict(NODE_DOWN if failures == "node_down" else LINK_DEGRADE)]}
        if failures == "link_degrade":  # a fabric with named links
            data["cluster"]["fabric"] = {"topology": "fat_tree", "nodes_per_leaf": 1, "link": {"bandwidth": "100 Gb/s"}}
    if failures not in (None, "straggler") and not _wild(draw) or failures == "straggler" and _wild(draw):
        data["run"] = {"duration": "1 h", "warmup": 1, "fidelity": "estimate"}
    if _wild(draw) and _wild(draw):
        data["run"]["replicas"] = 2
    return data


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                        HealthCheck.too_slow])
@given(data=scenarios())
def test_generated_scenarios_check_as_they_run(data, tmp_path):
    assert_check_equals_run(data, tmp_path / "gen.yaml")


def test_a_model_that_does_not_fit_is_exit_3_in_check_as_in_run(tmp_path):
    data = {"name": "big", "cluster": {"nodes": [_node(1, GPUS[0], 2)]},
            "workload": {"model": "gpt2-xl", "batch_per_gpu": 64, "precision": "fp16", "seq_len": 1024},
            "run": {"fidelity": "estimate"}}
    (check_code, check_lines), (run_code, run_lines) = check_and_run(data, tmp_path / "big.yaml")
    assert check_code == run_code == 3 and check_lines[0] == run_lines[0] and re.match(MEMORY, check_lines[0])
