"""`plan` skips compute classes whose throughput bound cannot reach the top-k or the Pareto front: the
plan must be exactly the one estimating every candidate gives, and the bound must hold on every point."""
from __future__ import annotations

from dataclasses import replace

import pytest

from simdist.io.sweep_load import load_point, plan_spec
from simdist.planner.axes import expand
from simdist.planner.bound import compute_bound
from simdist.planner.plan import search

AXES = ["workload.batch_per_gpu=1,2,32,64", "communication.strategy=ring,tree,ps",
        "communication.bucket_size=5 MB,25 MB,100 MB", "communication.overlap=true,false"]


def _same(a, b):
    strip = ("estimate_iteration_time_s",)
    return [{k: v for k, v in r.items() if k not in strip} for r in a] == [
        {k: v for k, v in r.items() if k not in strip} for r in b]


@pytest.mark.parametrize("options", [{"objective": "throughput"}, {"objective": "cost"},
                                     {"objective": "time_to_train", "samples": 1e6}])
def test_bounded_plan_equals_the_exhaustive_one(base, options):
    spec = plan_spec({}, AXES, {**options, "confirm": 0, "top": 3})
    bounded = search(spec, base, load_point, jobs=1)
    full = search(replace(spec, prune=False), base, load_point, jobs=1)
    assert full.pruned == 0 and full.evaluated == 72
    assert bounded.pruned > 0 and bounded.evaluated + bounded.pruned == 72
    assert "skipped by a compute bound" in bounded.search
    assert _same(bounded.ranked, full.ranked)
    assert _same(bounded.front, full.front)


def test_the_bound_holds_on_every_candidate(base):
    """The compute-only bound is above every candidate's estimated throughput (and carries its price)."""
    from simdist.engine.simulation import simulate

    spec = plan_spec({}, AXES, {})
    for p in expand(spec.axes)[::5]:
        s = load_point(base, (), p.as_dict(), ".", "t")
        b = compute_bound(s)
        r = simulate(s, fidelity="estimate")
        assert b is not None and r.throughput.samples_per_s <= b.samples_per_s
        assert r.cost.price_per_hour_usd == b.price_per_hour


def test_a_bound_that_fails_on_an_estimated_point_stops_the_skipping(base, monkeypatch):
    """Were the bound ever wrong, the plan must notice on the candidates it estimates and fall back to
    estimating everything (here every class is given a bound far below what it reaches)."""
    import simdist.planner.plan as plan_mod

    def low(scenario):
        b = compute_bound(scenario)
        return replace(b, samples_per_s=b.samples_per_s / 1000)

    monkeypatch.setattr(plan_mod, "compute_bound", low)
    spec = plan_spec({}, AXES, {"confirm": 0, "top": 3})
    plan = search(spec, base, load_point, jobs=1)
    full = search(replace(spec, prune=False), base, load_point, jobs=1)
    assert plan.pruned == 0 and plan.evaluated == 72 and "compute bound exceeded" in plan.search
    assert _same(plan.ranked, full.ranked)


def test_a_sampled_plan_skips_too_and_ranks_the_same(base):
    """Beyond max_points the random sample is estimated class by class with the same skipping, and the
    local search after it ends where it ends without skipping."""
    spec = plan_spec({}, AXES, {"confirm": 0, "top": 3, "max_points": 60, "search": "sample"})
    bounded = search(spec, base, load_point, jobs=1)
    full = search(replace(spec, prune=False), base, load_point, jobs=1)
    assert bounded.search.startswith("random sample of 60 of 72 (") and "skipped by a compute bound" in bounded.search
    assert bounded.pruned > 0 and full.pruned == 0
    assert _same(bounded.ranked, full.ranked)
    assert _same(bounded.front, full.front)
