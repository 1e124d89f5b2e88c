"""A scenario's `calibration:` key applies the profile's measured efficiencies when the file loads."""
import json
import textwrap

import pytest

from simdist.errors import ScenarioError
from simdist.io.load import load_scenario

REAL_CATALOGS = True  # conftest: use the real catalogs

SCENARIO = """
name: cal
cluster:
  nodes:
    - {count: 4, gpu: t4-16gb, gpus_per_node: 1, intra_node: pcie-gen3,
       nic: {bandwidth: "1 Gb/s", transport: tcp}}
  fabric: {topology: single_switch}
workload:
  benchmark: {op: all_reduce, sizes: ["16 MB"]}
calibration: profile.json
"""


def test_profile_changes_nic_efficiency_and_latency(tmp_path):
    (tmp_path / "profile.json").write_text(json.dumps(
        {"links": [{"transport": "tcp", "role": "nic", "latency_s": 0.0, "efficiency": 0.9577}]}))
    (tmp_path / "s.yaml").write_text(textwrap.dedent(SCENARIO))
    s = load_scenario(tmp_path / "s.yaml")
    nic = s.cluster.node_groups[0].nic.link
    assert nic.efficiency == pytest.approx(0.9577)
    assert nic.latency_s == 0.0
    assert s.calibration.endswith("profile.json")


def test_bad_profile_is_a_scenario_error(tmp_path):
    (tmp_path / "profile.json").write_text(json.dumps({"links": [{"transport": "tcp", "efficiency": 1.7}]}))
    (tmp_path / "s.yaml").write_text(textwrap.dedent(SCENARIO))
    with pytest.raises(ScenarioError, match="efficiency"):
        load_scenario(tmp_path / "s.yaml")
