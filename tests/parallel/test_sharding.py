"""ZeRO / FSDP collectives: what each stage sends, against the ZeRO paper's communication volumes."""
from __future__ import annotations

import pytest

from simdist.collectives.schedule import CollectiveOp
from simdist.strategies.sharding import (
    ShardPhase, fsdp_units, wire_bytes_per_rank, zero3_live_param_bytes, zero_collectives,
)
from simdist.workload import get_model

AR, RS, AG = CollectiveOp.ALL_REDUCE, CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_GATHER


@pytest.fixture(scope="module")
def gpt2():
    return get_model("gpt2", seq_len=1024)


def test_units_are_blocks_plus_a_root(gpt2) -> None:
    units = fsdp_units(gpt2)
    assert [u.name for u in units] == ["root"] + [f"blocks.{i}" for i in range(12)]
    assert sum(u.params for u in units) == gpt2.params
    assert len({i for u in units for i in u.layers}) == sum(len(u.layers) for u in units)


@pytest.mark.parametrize("dp", [2, 8, 64])
def test_zero_paper_volumes(gpt2, dp: int) -> None:
    units = fsdp_units(gpt2)
    psi = gpt2.params * 2  # fp16 parameters and gradients
    vol = {z: wire_bytes_per_rank(zero_collectives(z, units, dp, 2, 2), dp) for z in range(4)}
    ddp = 2 * (dp - 1) / dp * psi
    assert vol[0] == pytest.approx(ddp)
    assert vol[1] == pytest.approx(ddp) and vol[2] == pytest.approx(ddp)  # ZeRO paper section 7.2.1
    assert vol[3] == pytest.approx(1.5 * ddp)  # section 7.2.2: 3 Psi, 1.5x the baseline


def test_zero3_gathers_twice_and_prefetches_one_ahead(gpt2) -> None:
    units = fsdp_units(gpt2)
    cs = zero_collectives(3, units, 8, 2, 4)
    fwd = [c for c in cs if c.phase is ShardPhase.FWD]
    assert [c.unit for c in fwd] == list(range(13)) and all(c.op is AG for c in fwd)
    assert fwd[0].issue_with is None and fwd[5].issue_with == (ShardPhase.FWD, 4)
    bwd_ag = [c for c in cs if c.phase is ShardPhase.BWD and c.op is AG]
    assert [c.unit for c in bwd_ag] == [0] + list(range(12, 0, -1))  # root (LM head) first, then blocks reversed
    assert bwd_ag[2].issue_with == (ShardPhase.BWD, bwd_ag[1].unit)
    rs = [c for c in cs if c.op is RS]
    assert [c.unit for c in rs] == list(range(12, 0, -1)) + [0]  # the embedding's gradient comes last
    assert rs[0].size_bytes == units[12].params * 4 and bwd_ag[1].size_bytes == units[12].params * 2
    assert not any(c.phase is ShardPhase.STEP for c in cs)


def test_zero12_gather_updated_parameters_after_the_step(gpt2) -> None:
    for z in (1, 2):
        cs = zero_collectives(z, fsdp_units(gpt2), 4, 2, 4)
        step = [c for c in cs if c.phase is ShardPhase.STEP]
        assert len(step) == 1 and step[0].op is AG and step[0].size_bytes == gpt2.params * 2
        assert sum(c.size_bytes for c in cs if c.op is RS) == gpt2.params * 4


def test_dp1_sends_nothing_and_bad_stage_refused(gpt2) -> None:
    assert zero_collectives(3, fsdp_units(gpt2), 1, 2, 2) == ()
    with pytest.raises(AssertionError, match="ZeRO stages 0-3, not 4"):  # the schema refuses it
        zero_collectives(4, fsdp_units(gpt2), 8, 2, 2)


def test_live_gathered_parameters_are_two_adjacent_units(gpt2) -> None:
    units = fsdp_units(gpt2)
    assert zero3_live_param_bytes(units, 2) == max(a.params + b.params for a, b in zip(units, units[1:])) * 2
    assert zero3_live_param_bytes(units, 2) < gpt2.params * 2


def test_model_without_blocks_is_one_unit_per_layer() -> None:
    m = get_model("resnet50")
    units = fsdp_units(m)
    assert len(units) == sum(1 for x in m.layers if x.params) and sum(u.params for u in units) == m.params
