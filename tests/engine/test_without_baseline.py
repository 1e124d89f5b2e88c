"""simulate(baseline=False), what sweeps use: the same result without the uncompressed baseline's ratio."""
import pytest

from simdist.engine.simulation import simulate
from simdist.io.load import load_scenario


@pytest.mark.parametrize("fidelity", ["estimate", "simulate"])
def test_skipping_the_baseline_changes_only_relative_time_to_target(fidelity):
    s = load_scenario("scenarios/default.yaml", ["cluster.nodes.0.count=2", "communication.compression.method=int8"])
    full = simulate(s, fidelity).to_dict()
    lean = simulate(s, fidelity, baseline=False).to_dict()
    assert full["statistical_efficiency"]["relative_time_to_target"] is not None
    assert lean["statistical_efficiency"]["relative_time_to_target"] is None
    lean["statistical_efficiency"]["relative_time_to_target"] = full["statistical_efficiency"][
        "relative_time_to_target"]
    assert lean == full
