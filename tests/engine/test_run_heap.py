"""The cyclic collector within a run: what a run builds to last is frozen, and nothing stays frozen after it."""
import gc

import simdist
from simdist.topology.gcpause import gc_paused, run_heap

PRESET = "scenarios/presets/megatron-gpt3-175b.yaml"


def test_lasting_blocks_freeze_only_inside_a_run():
    assert gc.get_freeze_count() == 0
    with gc_paused(lasts_the_run=True):
        kept = [[i] for i in range(100)]
    assert gc.get_freeze_count() == 0 and gc.isenabled()  # outside a run: only paused
    with run_heap():
        with gc_paused():
            kept += [[i] for i in range(100)]
        assert gc.get_freeze_count() == 0  # a block that does not last the run is not frozen
        with gc_paused(lasts_the_run=True):
            kept += [[i] for i in range(100)]
        assert gc.get_freeze_count() >= 100 and gc.isenabled()
        with run_heap():  # nested: the outer run's scope
            pass
        assert gc.get_freeze_count() >= 100
    assert gc.get_freeze_count() == 0 and gc.isenabled()


def test_a_model_parallel_simulate_leaves_nothing_frozen():
    scenario = simdist.load(PRESET, overrides=["run.fidelity=simulate", "run.iterations=2"])
    result = simdist.simulate(scenario)
    assert result.iteration_time_s > 0
    assert gc.get_freeze_count() == 0 and gc.isenabled()
