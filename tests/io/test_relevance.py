"""A key set where this run never reads it is refused with its path (never silently ignored)."""
from __future__ import annotations

import copy

import pytest

from simdist.errors import ScenarioError
from tests.engine.test_every_key import BENCH, STRAGGLER, TRAIN
from tests.strategies.scenario_runner import run_with

REAL_CATALOGS = True  # conftest: the real catalogs (the scenarios name real hardware)


@pytest.mark.parametrize("base, changes, path", [
    (TRAIN, {"training.staleness": 2}, "training.staleness"),  # bsp has no staleness bound
    (TRAIN, {"training.local_steps": 4}, "training.local_steps"),
    (TRAIN, {"communication.ps": {"servers": 4}}, "communication.ps.servers"),  # a ring has no servers
    (TRAIN, {"communication.hierarchical": {"inter": "tree"}}, "communication.hierarchical.inter"),
    (TRAIN, {**STRAGGLER, "failures.recovery": {"restart": "1 min"}}, "failures.recovery.restart"),
    (TRAIN, {"failures": {"random": {"repair": "1 h"}}}, "run.duration"),  # a failure run needs its wall time
    (BENCH, {"training.optimizer": "adam"}, "training.optimizer"),  # a benchmark does not train
    (BENCH, {"communication.overlap": False}, "communication.overlap"),
    (BENCH, {"run.iterations": 5}, "run.iterations"),
    (BENCH, {"workload.grad_dtype": "fp16"}, "workload.grad_dtype"),
    (BENCH, STRAGGLER, "failures"),
])
def test_unread_keys_are_refused(base, changes, path):
    with pytest.raises(ScenarioError) as err:
        run_with(base, copy.deepcopy(changes))  # run_with inserts values by reference: keep STRAGGLER intact
    assert any(i.path == path for i in err.value.issues), str(err.value)


def test_every_problem_is_reported_at_once():
    with pytest.raises(ScenarioError) as err:
        run_with(TRAIN, {"training.staleness": 2, "training.local_steps": 4})
    assert {i.path for i in err.value.issues} >= {"training.staleness", "training.local_steps"}


def test_the_same_keys_count_where_they_are_read():
    assert run_with(TRAIN, {"training.sync": "local_sgd", "training.local_steps": 4}).iteration_time_s > 0
    assert run_with(BENCH, {"communication.strategy": "hierarchical",
                            "communication.hierarchical": {"inter": "tree"}}).collectives
