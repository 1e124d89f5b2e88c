"""The published suite's progress bar counts work, not cases (validation/published/eta.py)."""
from __future__ import annotations

from simdist.validation.published.cases import load_cases
from simdist.validation.published.eta import SHARES, case_cost, work_shares


def test_shares_cover_the_suite_exactly():
    cases = load_cases().cases
    shares = work_shares(cases)
    assert len(shares) == len(cases) and sum(shares) == SHARES and min(shares) >= 0


def test_a_large_pipeline_weighs_more_than_a_small_benchmark():
    by_name = {c.name: c for c in load_cases().cases}
    megatron = case_cost(by_name["megatron-ptdp-gpt3-175b-384-a100"])
    nccl = case_cost(by_name["nccl-v100-4node-1xedr"])
    assert megatron > 10 * nccl


def test_the_cheap_cases_listed_first_are_a_small_share():
    """The data file lists nccl-tests points first: counting cases made the ETA at case 23 ten times too short."""
    shares = work_shares(load_cases().cases)
    assert sum(shares[:23]) < 0.5 * 23 / len(shares) * SHARES
