"""Random failures: counts match the MTBF arithmetic, the job rate adds up, the same seed repeats."""
from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from simdist.failures.targets import failure_targets
from simdist.failures.incidents import lemon_nodes, sample_random
from simdist.failures.rates import DEFAULT_MTBF_S, job_rate, young_daly_interval_s
from simdist.scenario import FailureDistribution, RandomFailuresSpec
from tests.failures.helpers import facts

HOUR = 3600.0


@pytest.mark.parametrize("distribution, shape", [(FailureDistribution.EXPONENTIAL, 1.0),
                                                 (FailureDistribution.WEIBULL, 0.7),
                                                 (FailureDistribution.WEIBULL, 1.5)])
def test_mean_number_of_failures_matches_the_mtbf_arithmetic(distribution, shape):
    """A stationary renewal process (first failure from the equilibrium law, fresh lifetimes after) fails
    count x duration / MTBF times on average, whatever the lifetime law: 2,000 nodes, MTBF 2,000 h over
    500 h is 500 failures per replica, several failures per node in the Weibull cases."""
    f = facts(2000, gpus_per_node=1)
    spec = RandomFailuresSpec(node_mtbf_s=2000 * HOUR, distribution=distribution, weibull_shape=shape, repair_s=0.0)
    counts = [len(sample_random(spec, f, 500 * HOUR, np.random.default_rng([7, r]))) for r in range(60)]
    expected = 2000 * 500 / 2000
    se = statistics.stdev(counts) / math.sqrt(len(counts))
    assert abs(statistics.fmean(counts) - expected) < 4 * se
    assert se < 0.01 * expected  # the test can resolve a 4 % bias


def test_repair_time_removes_the_down_time_from_the_exposure():
    f = facts(2000, gpus_per_node=1)
    spec = RandomFailuresSpec(node_mtbf_s=200 * HOUR, repair_s=50 * HOUR)
    counts = [len(sample_random(spec, f, 1000 * HOUR, np.random.default_rng([3, r]))) for r in range(20)]
    # long-run rate 1 / (MTBF + repair); the first failure comes at rate 1 / MTBF
    assert statistics.fmean(counts) < 2000 * 1000 / 200 * 0.9
    assert statistics.fmean(counts) == pytest.approx(2000 * 1000 / 250, rel=0.05)


def test_every_component_kind_and_the_nodes_it_takes():
    f = facts(16, gpus_per_node=8, leaves=2)
    spec = RandomFailuresSpec(gpu_mtbf_s=100 * HOUR, nic_mtbf_s=100 * HOUR, switch_mtbf_s=10 * HOUR)
    incs = sample_random(spec, f, 50 * HOUR, np.random.default_rng(0))
    kinds = {i.kind for i in incs}
    assert kinds == {"gpu", "nic", "switch"}
    assert all(len(i.nodes) == 8 for i in incs if i.kind == "switch")  # a leaf takes its rack
    assert all(len(i.nodes) == 1 for i in incs if i.kind != "switch")


def test_lemons_fail_k_times_more_often():
    f = facts(1000, gpus_per_node=1)
    spec = RandomFailuresSpec(node_mtbf_s=1000 * HOUR, repair_s=0.0, lemon_fraction=0.1, lemon_factor=10.0)
    rng = np.random.default_rng(5)
    lemons = lemon_nodes(spec, f, np.random.default_rng(5))
    incs = sample_random(spec, f, 500 * HOUR, rng)
    on_lemons = sum(1 for i in incs if i.nodes[0] in lemons)
    assert len(lemons) == 100
    # expected 100 x 10 x 0.5 = 500 on lemons, 900 x 0.5 = 450 elsewhere
    assert on_lemons == pytest.approx(500, rel=0.15) and len(incs) - on_lemons == pytest.approx(450, rel=0.15)
    assert job_rate(spec, f).per_s * 500 * HOUR == pytest.approx(950)


def test_same_seed_same_failures_and_no_global_state():
    f = facts(64)
    spec = RandomFailuresSpec(defaults=True, distribution=FailureDistribution.WEIBULL, repair_sigma=1.0)
    a = sample_random(spec, f, 1e8, np.random.default_rng([1, 2]))
    np.random.seed(99)  # the legacy global generator is never used
    b = sample_random(spec, f, 1e8, np.random.default_rng([1, 2]))
    assert a == b and a != sample_random(spec, f, 1e8, np.random.default_rng([1, 3]))


def test_default_rates_give_a_few_failures_per_thousand_node_days():
    f = facts(1, gpus_per_node=8)  # one DGX-like node: 8 GPUs, 8 NICs
    f = type(f)(**{**f.__dict__, "nics": 8, "nic_node": (0,) * 8})
    rate = job_rate(RandomFailuresSpec(defaults=True), f)
    per_1000_node_days = rate.per_s * 86400 * 1000
    assert 2.0 < per_1000_node_days < 7.0
    assert set(DEFAULT_MTBF_S) == {"gpu", "node", "nic", "link", "switch"}


def test_young_daly():
    assert young_daly_interval_s(60.0, 24 * HOUR) == pytest.approx(math.sqrt(2 * 60 * 86400))
    assert young_daly_interval_s(60.0, math.inf) == math.inf


def test_the_job_mtbf_counts_interruptions_not_reroutes():
    from simdist.topology.build import build_topology
    from tests.failures.test_engine_goodput import _scenario

    f = failure_targets(build_topology(_scenario().cluster))  # 4 nodes, 2 per leaf, 2 spines: every link redundant
    spec = RandomFailuresSpec(link_mtbf_s=100 * HOUR, switch_mtbf_s=1000 * HOUR)
    rate = job_rate(spec, f)
    # 4 leaf-spine links only reroute; of the 4 switches the 2 leaves take their racks, the spines reroute
    assert rate.per_component_per_s == {"link": 0.0, "switch": pytest.approx(2 / (1000 * HOUR))}
    assert rate.reroute_per_component_per_s == {"link": pytest.approx(4 / (100 * HOUR)),
                                                "switch": pytest.approx(2 / (1000 * HOUR))}
    # a sync mode that cannot reroute stops on every fabric fault
    assert job_rate(spec, f, reroute=False).per_s == pytest.approx(4 / (100 * HOUR) + 4 / (1000 * HOUR))
