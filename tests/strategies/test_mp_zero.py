"""ZeRO 1-3 over each pipeline stage's dp group combined with tensor and pipeline parallelism, and tensor-
parallel communication overlapped with the GEMMs (training.tp_comm_overlap): memory against the ZeRO formulas
on the stage's tp shard, the dp bytes ZeRO-3 + tp moves against a hand count, the overlap's bounds, estimate
= simulate, and the refusals."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from simdist.collectives.schedule import CollectiveOp, Group
from simdist.engine.closed_form import fold
from simdist.errors import ScenarioError
from simdist.graph.builder import GraphBuilder
from simdist.graph.tasks import Collective, ProcessGroup, RankClass
from simdist.strategies.mp_plan import Overlap, Segment, build_mp_plan
from simdist.strategies.pipeline_graph import _overlapped, pipeline_graphs, tp_exchange_group, tp_group
from simdist.strategies.tensor_parallel import Phase, TpCollective, When
from tests.strategies.scenario_runner import run_with
from tests.strategies.test_pipeline_parallel import GPT, _scenario

L, H, V, S = 4, 256, 1000, 128
SMALL = {"workload.model": {"gpt": {"layers": L, "hidden": H, "heads": 4, "vocab": V}}, "workload.seq_len": S,
         "training.optimizer": "adam", "workload.global_batch": 16}


def tp_shard_params(t: int, layers: int = L) -> float:
    """One tp rank's parameters of the whole model by hand: vocab-parallel embedding, replicated positions and
    norms, per block 12h^2 / t weights, column biases / t, row biases and norms whole; the head is tied."""
    h = H
    block = 12 * h * h / t + h * (3 / t + 4 / t) + h * (1 + 1) + 4 * h
    return V * h / t + S * h + layers * block + 2 * h


def test_stage_params_are_the_hand_count():
    plan = build_mp_plan(_scenario({**SMALL, "training.parallelism": {"tp": 2, "dp": 8, "zero": 1}}))
    assert plan.stages[0].params == pytest.approx(tp_shard_params(2))


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_memory_follows_the_zero_formulas_on_the_stage_shard(zero):
    """dp 4 x tp 2 x pp 2, fp16 with Adam and fp32 gradients: weights 2Ψ, gradients 4Ψ, states 12Ψ on the
    stage's tp shard Ψ, divided by dp from stage 3, 2 and 1 on (Rajbhandari et al. 2020)."""
    r = run_with(GPT, {**SMALL, "training.parallelism": {"tp": 2, "pp": 2, "dp": 4, "zero": zero}})
    stages = r.to_dict()["parallelism"]["stages"]
    parts = r.memory.parts_bytes
    dp = 4
    # the tightest stage: find which stage's shard the reported weights belong to
    psi = next(s["params_per_gpu"] for s in stages
               if parts["weights"] == pytest.approx(2 * s["params_per_gpu"] / (dp if zero == 3 else 1))
               or parts["weights"] == pytest.approx(2 * (s["params_per_gpu"] + V * H / 2) / (dp if zero == 3 else 1)))
    if parts["weights"] != pytest.approx(2 * psi / (dp if zero == 3 else 1)):
        psi += V * H / 2  # the last stage's own copy of the tied embedding (Megatron-LM)
    assert parts["weights"] == pytest.approx(2 * psi / (dp if zero >= 3 else 1))
    assert parts["gradients"] == pytest.approx(4 * psi / (dp if zero >= 2 else 1))
    assert parts["optimizer_states"] == pytest.approx(12 * psi / (dp if zero >= 1 else 1))


def test_zero_memory_falls_by_stage_with_tp_and_pp():
    """8 blocks per stage: ZeRO-3's gathered unit and prefetched one are a quarter of the stage (with 2 blocks
    per stage they would be all of it, and stage 3 would hold more than stage 2); 1 MB buckets (stage 2's
    reduce bucket of 25 MB would outweigh its saving on this small a model)."""
    deep = {**SMALL, "workload.model": {"gpt": {"layers": 16, "hidden": H, "heads": 4, "vocab": V}},
            "communication.bucket_size": "1 MB"}
    per = [run_with(GPT, {**deep, "training.parallelism": {"tp": 2, "pp": 2, "dp": 4, "zero": z},
                          **({"communication.bucket_size": "25 MB"} if z == 3 else {})}).memory  # stage 3: units
           .per_gpu_bytes for z in (0, 1, 2, 3)]
    assert per[0] > per[1] > per[2] > per[3]


def _dp_tasks(scenario):
    plan = build_mp_plan(scenario)
    graphs = pipeline_graphs(plan, scenario.communication.bucket_size_bytes)
    return plan, [t for g in graphs for t in g.tasks if isinstance(t, Collective) and t.group.startswith("dp.")]


def test_zero3_with_tp_moves_the_bytes_counted_by_hand():
    """ZeRO-3, dp 8 x tp 2, 2 micro-batches (grad_accumulation): every micro-batch all_gathers each unit's
    tp shard twice (forward, backward) in fp16 and reduce_scatters its fp32 gradients once; nothing after
    the step. Each rank sends (dp - 1) / dp of each."""
    s = _scenario({**SMALL, "training.parallelism": {"tp": 2, "dp": 8, "zero": 3}, "training.grad_accumulation": 2})
    plan, tasks = _dp_tasks(s)
    psi, m = tp_shard_params(2), 2
    assert plan.micro_batches == m
    ag = sum(t.size_bytes for t in tasks if t.op == CollectiveOp.ALL_GATHER)
    rs = sum(t.size_bytes for t in tasks if t.op == CollectiveOp.REDUCE_SCATTER)
    assert ag == pytest.approx(m * 2 * psi * 2)
    assert rs == pytest.approx(m * psi * 4)
    assert not [t for t in tasks if t.op == CollectiveOp.ALL_REDUCE]
    units = len(plan.stages[0].units)
    assert units == L + 1  # one per block and the root (embeddings, final norm)
    assert sum(1 for t in tasks if t.op == CollectiveOp.ALL_GATHER) == m * 2 * units


@pytest.mark.parametrize("zero,rs_factor", [(1, 1), (2, 4)])
def test_zero12_reduce_scatter_once_or_every_micro_batch_then_gather_the_step(zero, rs_factor):
    s = _scenario({**SMALL, "training.parallelism": {"tp": 2, "pp": 2, "dp": 4, "zero": zero},
                   "workload.global_batch": 16})
    plan, tasks = _dp_tasks(s)
    assert plan.micro_batches == 4
    psi = sum(st.params for st in plan.stages)
    rs = sum(t.size_bytes for t in tasks if t.op == CollectiveOp.REDUCE_SCATTER)
    ag = sum(t.size_bytes for t in tasks if t.op == CollectiveOp.ALL_GATHER)
    assert rs == pytest.approx(rs_factor * psi * 4)  # stage 2: the 4 micro-batches each
    assert ag == pytest.approx(psi * 2)
    if zero == 2:
        assert any("DeepSpeed" in w for w in plan.warnings)


@pytest.mark.parametrize("zero", [1, 2, 3])
@pytest.mark.parametrize("overlap", [True, False])
def test_zero_with_tp_estimate_equals_simulate_without_contention(zero, overlap):
    """tp 8 inside each node, dp 2 over the 8 NIC rails: no link is shared, so the flow simulation equals
    the fold of the closed forms, interference included."""
    case = {**SMALL, "workload.model": {"gpt": {"layers": L, "hidden": H, "heads": 8, "vocab": V}},
            "training.parallelism": {"tp": 8, "dp": 2, "zero": zero}, "workload.global_batch": 8,
            "communication.overlap": overlap}
    e = run_with(GPT, case, "estimate")
    s = run_with(GPT, case, "simulate")
    assert s.iteration_time_s == pytest.approx(e.iteration_time_s, rel=1e-6)


# ----------------------------------------------------------------------------- tp_comm_overlap


def _ring(mode: Overlap, n: int, gemm_s: float, piece_s: float) -> float:
    """A segment's GEMM (gemm_s in all) with its collective as n - 1 exchanges of piece_s each, folded."""
    b = GraphBuilder()
    op = CollectiveOp.ALL_GATHER if mode is Overlap.RING_AG else CollectiveOp.REDUCE_SCATTER
    call = TpCollective(op, 1.0, Phase.FWD, 0, When.BEFORE, "x")
    _overlapped(b, SimpleNamespace(tp=n), 0, "F0", 0, Segment(gemm_s, "gemm", call, "forward", -1, mode), [])
    g = b.build(RankClass(0, (0,), 0, "x", 1))
    groups = {name: ProcessGroup(name, "tp", (0,), Group((0,), ((0,),))) for name in (tp_group(0),
                                                                                      tp_exchange_group(0))}
    return fold([g], lambda t, _: piece_s, groups).end_s


@pytest.mark.parametrize("mode", [Overlap.RING_AG, Overlap.RING_RS])
@pytest.mark.parametrize("gemm_s,piece_s", [(4.0, 0.5), (4.0, 1.0), (4.0, 3.0)])
def test_ring_overlap_is_chunk_plus_the_slower_of_each_step(mode, gemm_s, piece_s):
    n = 4
    t = _ring(mode, n, gemm_s, piece_s)
    assert t == pytest.approx(gemm_s / n + (n - 1) * max(gemm_s / n, piece_s))
    assert t >= max(gemm_s, (n - 1) * piece_s) - 1e-12  # never better than the slower of the two
    assert t <= gemm_s + (n - 1) * piece_s + 1e-12  # never worse than running them one after the other


SP = {"training.parallelism": {"tp": 8}, "training.sequence_parallel": True, "cluster.nodes.0.count": 1,
      "workload.model": {"gpt": {"layers": 2, "hidden": 8192, "heads": 64, "vocab": 32000}}, "workload.seq_len": 2048,
      "workload.global_batch": 1}  # GEMMs large enough for the chunks to stay efficient (Megatron uses it at scale)


def test_tp_comm_overlap_hides_tp_communication_within_its_bounds():
    seq = run_with(GPT, SP)
    ov = run_with(GPT, {**SP, "training.tp_comm_overlap": True})
    assert ov.iteration_time_s < seq.iteration_time_s
    a, b = seq.breakdown_s, ov.breakdown_s
    assert b.exposed_communication < 0.5 * a.exposed_communication
    assert ov.iteration_time_s >= max(b.compute + b.optimizer, b.tp_communication)
    assert b.compute > a.compute  # the GEMM chunks are smaller (less efficient) and slowed by interference
    assert ov.parallelism.tp_comm_overlap is True


def test_tp_comm_overlap_estimate_equals_simulate_without_contention():
    case = {**SP, "training.tp_comm_overlap": True}
    e = run_with(GPT, case, "estimate")
    s = run_with(GPT, case, "simulate")
    assert s.iteration_time_s == pytest.approx(e.iteration_time_s, rel=1e-6)


def test_tp_comm_overlap_needs_sequence_parallel():
    with pytest.raises(ScenarioError, match="training.tp_comm_overlap"):
        run_with(GPT, {"training.parallelism": {"tp": 8, "dp": 2}, "training.tp_comm_overlap": True})


def test_tp_comm_overlap_loses_on_small_gemms():
    """Cut into tp chunks, small GEMMs lose more efficiency than the hidden communication saves (the
    reason Megatron-LM leaves it off by default)."""
    small = {**SP, "workload.model": {"gpt": {"layers": 2, "hidden": 1024, "heads": 16, "vocab": 32000}},
             "workload.seq_len": 1024}
    assert run_with(GPT, {**small, "training.tp_comm_overlap": True}).iteration_time_s > \
        run_with(GPT, small).iteration_time_s


def test_mfu_is_the_results_formula():
    from simdist.results.mfu import cluster_mfu

    r = run_with(GPT, {"training.parallelism": {"tp": 4, "pp": 2, "dp": 2}})
    s = _scenario({})
    g = s.cluster.node_groups[0]
    assert r.extra["mfu"] == pytest.approx(cluster_mfu(s.workload.model, r.throughput.samples_per_s,
                                                       [(g.gpu, 16)], "fp16"), rel=1e-12)


# ----------------------------------------------------------------------------- estimate's fused tp chains


@pytest.mark.parametrize("changes", [
    {"training.parallelism": {"tp": 4, "pp": 2, "dp": 2}, "communication.overlap": False},
    {"training.parallelism": {"tp": 8, "pp": 2}, "training.sequence_parallel": True, "training.recompute": "full"},
    {"training.parallelism": {"tp": 4, "pp": 2, "dp": 2, "zero": 2}, "communication.overlap": False,
     "training.schedule": "interleaved", "training.virtual_stages": 2},
    {"training.parallelism": {"tp": 2, "cp": 2, "pp": 2}, "training.sequence_parallel": True,
     "workload.flash_attention": True},
])
def test_fused_tp_chains_fold_to_the_unfused_result(changes):
    """estimate folds each chunk's blocking tp chain into one task: the same iteration and breakdown terms (a
    context-parallel core's K/V transfers too, those hidden under its ring steps' compute included)."""
    from simdist.engine.context import build_context
    from simdist.graph.spans import stage_terms
    from simdist.engine.plans import fused_graphs
    from simdist.scenario import Fidelity

    s = _scenario(changes)
    plan = build_mp_plan(s)
    fabric = build_context(s, Fidelity.ESTIMATE).layout_groups(plan.layout, plan)
    plain = pipeline_graphs(plan, s.communication.bucket_size_bytes)
    fused, inner = fused_graphs(plan, fabric, s.communication.bucket_size_bytes)
    assert sum(len(g.tasks) for g in fused) < 0.7 * sum(len(g.tasks) for g in plain)
    a, b = fold(plain, fabric.time_of, fabric.groups), fold(fused, fabric.time_of, fabric.groups)
    assert b.end_s == pytest.approx(a.end_s, rel=1e-12)
    for g, h, f in zip(plain, fused, inner):
        ta = stage_terms(g, a.spans[g.rank_class.index], a.end_s)
        tb = stage_terms(h, b.spans[h.rank_class.index], b.end_s, f)
        assert tb == pytest.approx(ta, rel=1e-9, abs=1e-12)
