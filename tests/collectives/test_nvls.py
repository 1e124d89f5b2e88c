"""NVLS all-reduce (in-switch reduction on third-generation NVSwitch): the link load it puts on every GPU and
the bus bandwidth that follows, against the hand calculation and a published H100 figure."""
from __future__ import annotations

from collections import defaultdict

import pytest

from simdist.collectives.nvls import nvls_all_reduce, nvls_link_bytes
from simdist.engine.simulation import simulate
from simdist.io.load import load_scenario
from simdist.validation.published.cases import HERE

H100 = HERE / "scenarios" / "nccl-hgx-h100.yaml"


@pytest.mark.parametrize("n", [2, 4, 8])
def test_each_link_carries_its_own_contribution_and_result_too(n):
    """multimem.ld_reduce reads every GPU's block, the requester's own included, and multimem.st writes every
    GPU, the writer's included: (n + 1)/n x S per direction on each GPU's link, not the (n - 1)/n S it
    exchanges with the others."""
    size = 1e9
    (step,) = nvls_all_reduce(size, range(n))
    out, into = defaultdict(float), defaultdict(float)
    for t in step.transfers:
        out[t.src] += t.size_bytes
        into[t.dst] += t.size_bytes
    for r in range(n):
        assert out[r] == pytest.approx(size * (n + 1) / n) == pytest.approx(into[r])
    assert nvls_link_bytes(size, n) == pytest.approx(size * (n + 1) / n)
    assert nvls_all_reduce(size, [0]) == ()


def test_h100_node_busbw_is_the_hand_calculation_and_the_published_figure():
    """8 H100: 18 NVLink4 x 25 GB/s x 0.80 payload x 0.85 nvlsEfficiency = 306 GB/s per direction; busbw =
    algbw x 2 (n-1)/n = 306 n/(n+1) x 2 (n-1)/n = 2 x 306 x 7/9 = 476 GB/s. NVIDIA/nccl #1442 measures 480 GB/s
    on a p5.48xlarge (held-out case nccl-h100-1node-nvls)."""
    result = simulate(load_scenario(H100, ["workload.benchmark.sizes=['8 GB']"])).to_dict()
    (row,) = result["collectives"]
    assert row["algorithm"] == "nvls/Simple"
    link = 18 * 25e9 * 0.80 * 0.85
    assert row["busbw_GBps"] == pytest.approx(2 * link * 7 / 9 / 1e9, rel=0.01)
    assert abs(row["busbw_GBps"] - 480) / 480 < 0.05
    # still above the ring's one-way NVLink rate (360 GB/s): NCCL's choice on this node stays NVLS
    assert row["busbw_GBps"] > 18 * 25 * 0.80
