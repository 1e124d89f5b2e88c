"""The public Python API: a dict scenario through the strict schema, overrides, both fidelities, the result."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import simdist
from simdist.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _training(**workload) -> dict:
    return {
        "name": "api-test",
        "cluster": {
            "nodes": [{"count": 2, "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "intra_node": "nvswitch-a100",
                       "nic": {"bandwidth": "100 Gb/s", "latency": "2 us", "transport": "rdma"}}],
            "fabric": {"topology": "single_switch"},
        },
        "workload": {"model": "resnet50", "batch_per_gpu": 32, "precision": "fp16", **workload},
        "communication": {"strategy": "ring", "bucket_size": "25 MB"},
        "run": {"iterations": 3, "warmup": 1},
    }


def test_import_simdist_is_light_and_exports_lazily():
    code = ("import sys, simdist\n"
            "heavy = [m for m in ('yaml', 'pydantic', 'matplotlib', 'pandas', 'torch', 'simdist.api',"
            " 'simdist.engine') if m in sys.modules]\n"
            "print(heavy); simdist.load; print('simdist.api' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]" and out[1] == "True"
    assert {"load", "simulate", "estimate", "Result", "ScenarioError", "sweep"} <= set(dir(simdist))
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        simdist.nonexistent  # noqa: B018


def test_dict_scenario_both_fidelities_and_the_result_fields():
    scenario = simdist.load(_training())
    assert scenario.name == "api-test" and scenario.cluster.num_gpus == 16
    sim = simdist.simulate(scenario)
    est = simdist.estimate(scenario)
    assert (sim.fidelity, est.fidelity) == ("simulate", "estimate")
    assert sim.gpus == 16 and sim.scenario == "api-test" and sim.scenario_spec is scenario
    assert sim.iteration_time_s > 0 and sim.breakdown_s.compute > 0
    assert sim.throughput.samples_per_s == pytest.approx(16 * 32 / sim.iteration_time_s, rel=1e-9)
    # an idle single switch: the flow model equals the closed forms
    assert sim.iteration_time_s == pytest.approx(est.iteration_time_s, rel=1e-6)
    assert sim.strategy["name"] == "ring"  # an added JSON key is an attribute too
    assert set(sim.keys()) == set(sim.to_dict())
    with pytest.raises(AttributeError, match="no field 'iteration_time'"):
        sim.iteration_time  # noqa: B018


def test_overrides_as_mapping_list_or_string_equal_the_cli_set():
    a = simdist.load(_training(), {"communication.strategy": "tree", "cluster.nodes.0.count": 4,
                                   "communication.bucket_size": "10 MB", "run.seed": 7})
    b = simdist.load(_training(), ["communication.strategy=tree", "cluster.nodes.0.count=4",
                                   "communication.bucket_size=10 MB", "run.seed=7"])
    assert a == b
    assert a.cluster.num_gpus == 32 and a.communication.strategy.value == "tree"
    assert a.communication.bucket_size_bytes == 10e6 and a.run.seed == 7
    c = simdist.load(_training(), "communication.overlap=false")
    assert c.communication.overlap is False
    # values that YAML would read as other types stay what they are in Python
    d = simdist.load(_training(), {"name": "true", "communication.compression": {"method": "topk", "ratio": 1e-3}})
    assert d.name == "true" and d.communication.compression.ratio == 1e-3


def test_dict_goes_through_the_strict_schema():
    bad = _training()
    bad["communication"]["bucket_sise"] = "25 MB"
    bad["cluster"]["nodes"][0]["nic"]["bandwidth"] = 100
    with pytest.raises(simdist.ScenarioError) as err:
        simdist.load(bad)
    paths = {i.path for i in err.value.issues}
    assert {"communication.bucket_sise", "cluster.nodes.0.nic.bandwidth"} <= paths
    with pytest.raises(simdist.ScenarioError, match="cluster.nodes.5"):
        simdist.load(_training(), {"cluster.nodes.5.count": 2})
    with pytest.raises(simdist.ScenarioError, match="expected a scenario file path"):
        simdist.load(42)
    with pytest.raises(simdist.ScenarioError, match="takes no overrides"):
        simdist.load(simdist.load(_training()), {"run.seed": 1})
    with pytest.raises(simdist.ScenarioError, match="finite"):
        simdist.load(_training(), {"run.seed": float("nan")})


def test_to_dict_is_the_cli_json_object(tmp_path):
    path = ROOT / "scenarios" / "examples" / "nvswitch-8gpu-allreduce.yaml"
    result = simdist.simulate(path)
    cli = CliRunner().invoke(main, ["run", str(path), "--json"])
    assert cli.exit_code == 0, cli.output
    assert result.to_dict() == json.loads(cli.output)
    assert result.to_json() == cli.output
    assert result.simdist_version == simdist.__version__
    written = result.write(tmp_path / "out")
    assert json.loads((tmp_path / "out" / "result.json").read_text()) == result.to_dict()
    assert written[0].name == "result.json"


def test_file_with_overrides_equals_the_cli_set():
    path = ROOT / "scenarios" / "default.yaml"
    r = simdist.estimate(simdist.load(path, {"cluster.nodes.0.count": 2, "communication.strategy": "tree"}))
    cli = CliRunner().invoke(main, ["estimate", str(path), "--json", "--set", "cluster.nodes.0.count=2",
                                    "--set", "communication.strategy=tree"])
    assert cli.exit_code == 0, cli.output
    assert r.to_dict() == json.loads(cli.output) and r.gpus == 16


def test_to_frame_tables():
    pd = pytest.importorskip("pandas")
    r = simdist.simulate(_training())
    summary = r.to_frame()
    assert len(summary) == 1 and summary.loc[0, "breakdown_s.compute"] == r.breakdown_s.compute
    assert summary.loc[0, "iteration_time_s"] == r.iteration_time_s
    it = r.to_frame("iterations")
    assert list(it.columns) == ["iteration", "time_s"] and len(it) == len(r.iterations)
    tl = r.to_frame("timeline")
    kinds = {name.split()[0] for name in tl["name"]}  # tasks are named by what they are: "backward fc..bucket0"
    assert kinds >= {"forward", "backward"} and (tl["end_s"] >= tl["start_s"]).all()
    assert list(r.to_frame("links").columns) == ["link", "utilization"]
    with pytest.raises(ValueError, match="only a benchmark"):
        r.to_frame("collectives")
    with pytest.raises(ValueError, match="expected one of"):
        r.to_frame("nope")
    bench = simdist.estimate(ROOT / "scenarios" / "examples" / "nvswitch-8gpu-allreduce.yaml").to_frame("collectives")
    assert isinstance(bench, pd.DataFrame) and (bench["busbw_GBps"] > 0).all()


def test_to_frame_without_pandas_says_what_to_install(monkeypatch):
    r = simdist.estimate(_training())
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        r.to_frame()


def test_one_version_for_the_cli_and_the_json():
    out = CliRunner().invoke(main, ["--version"]).output
    assert out.strip() == f"simdist, version {simdist.__version__}"
    assert simdist.estimate(_training()).to_dict()["simdist_version"] == simdist.__version__


def test_breakeven_equals_the_cli_compare(tmp_path):
    import yaml

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_training()))
    table = simdist.breakeven(path, ["1 Gb/s", "10 Gb/s", "100 Gb/s"], ["fp16", "powersgd:4"])
    cli = CliRunner().invoke(main, ["compare", str(path), "--json", "--bandwidths", "1 Gb/s,10 Gb/s,100 Gb/s",
                                    "--methods", "fp16,powersgd:4"])
    assert cli.exit_code == 0, cli.output
    assert table.to_dict() == json.loads(cli.output)
    with pytest.raises(simdist.ScenarioError, match=r"bandwidths\[0\]"):
        simdist.breakeven(path, ["fast"], "fp16")


def test_bad_fidelity_and_pickling():
    with pytest.raises(simdist.ScenarioError, match="fidelity: got 'fast'"):
        simdist.simulate(_training(), fidelity="fast")
    import pickle

    r = simdist.estimate(_training())
    back = pickle.loads(pickle.dumps(r))
    assert back.to_dict() == r.to_dict() and back.scenario_spec.name == r.scenario_spec.name
