"""The llm_dense published cases: each runs the layout its quoted table row states, and fits in memory as it ran
(no recomputation stand-in: a published layout that ran must fit)."""
from __future__ import annotations

import re

import pytest

from simdist.io.feasibility import memory_infeasibility
from simdist.io.load import load_scenario
from simdist.validation.published.cases import load_cases

CASES = [c for c in load_cases().cases if c.category == "llm_dense"]
TABLE_ROWS = [c for c in CASES if "| TP |" in c.quote]


def _row(quote: str) -> dict[str, str]:
    """The quote's table header and its last row as {column: cell}; the first figure of a cell like '30624 (29521)'."""
    lines = [ln for ln in quote.splitlines() if ln.startswith("|")]
    cells = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in (lines[0], lines[-1])]
    return {k: v.split(" ")[0] for k, v in zip(*cells)}


def _int(cell: str) -> int:
    return 1 if cell in ("n/a", "0") else int(cell)


def _seq(row: dict[str, str]) -> int:
    """The row's sequence length: 'Sequence Length', or NeMo's fine-tuning tables' 'Packed Sequence Length'."""
    return int(row.get("Sequence Length") or row["Packed Sequence Length"])


def test_the_category_has_its_cases():
    assert len(CASES) >= 90 and len(TABLE_ROWS) >= 60


@pytest.mark.parametrize("case", TABLE_ROWS, ids=lambda c: c.name)
def test_the_scenario_runs_the_rows_layout(case):
    row = _row(case.quote)
    s = load_scenario(case.scenario.file, list(case.scenario.overrides))
    par, t, w = s.training.parallelism, s.training, s.workload
    assert s.cluster.num_gpus == int(row["#-GPUs"])
    assert (par.tp, par.pp, par.cp) == (int(row["TP"]), int(row["PP"]), _int(row.get("CP", "1")))
    assert t.virtual_stages == _int(row.get("VP", "1"))  # a table without VP: no interleaving
    assert (w.global_batch, w.seq_len) == (int(row["GBS"]), _seq(row))
    per_micro_step = t.micro_batch if par.tp * par.pp > 1 else w.global_batch // (par.dp * t.grad_accumulation)
    assert per_micro_step == int(row["MBS"])
    if "FSDP" in row:
        assert par.zero == (3 if _int(row["FSDP"]) > 1 else 1)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_published_layout_fits_as_it_ran(case):
    """No case carries a memory stand-in: the Megatron-Bridge and NeMo rows ran without recomputation unless the
    config cites the recipe's recompute_num_layers (full, block method), and torchtitan's as its source states
    (selective per-op, or full where the table says full); each fits the memory model so."""
    s = load_scenario(case.scenario.file, list(case.scenario.overrides))
    assert "recompute-stand-in" not in case.tags
    full = "Full activation checkpointing" in case.quote or "full AC" in case.quote
    recipe = "full" if "recompute_num_layers" in case.config else "none"
    assert s.training.recompute.value == (recipe if case.source.get("repo") != "pytorch/torchtitan" else
                                          "full" if full else "selective_op")
    assert memory_infeasibility(s) is None


MOE_CASES = [c for c in load_cases().cases if c.category == "llm_moe"]


def test_the_moe_category_has_its_cases():
    assert len(MOE_CASES) >= 90


@pytest.mark.parametrize("case", MOE_CASES, ids=lambda c: c.name)
def test_the_moe_scenario_runs_the_rows_layout(case):
    """The llm_moe rows (Megatron-Bridge's MoE tables): GPUs, tp, pp, cp, ep, vp, batch and sequence as the row states."""
    row = _row(case.quote)
    s = load_scenario(case.scenario.file, list(case.scenario.overrides))
    par, t, w = s.training.parallelism, s.training, s.workload
    assert s.cluster.num_gpus == int(row["#-GPUs"])
    assert (par.tp, par.pp, par.cp, par.ep) == (int(row["TP"]), int(row["PP"]), _int(row["CP"]), _int(row["EP"]))
    assert t.virtual_stages == _int(row["VP"])
    assert (w.global_batch, w.seq_len) == (int(row["GBS"]), _seq(row))
    # the recomputation the row's recipe sets, cited in its config (GPT-OSS 120B BF16 on GB200, B200, H100)
    modules = ("layernorm", "moe_act") if "recompute_modules [layernorm, moe_act]" in case.config else ()
    assert s.training.recompute.value == ("selective" if modules else "none")
    assert s.training.recompute_modules == modules and "recompute-stand-in" not in case.tags
