"""What tensor, pipeline and sharded data parallelism can run on the scenario's model and cluster.

The rules that need the resolved model (its transformer blocks, heads and layer shapes): tp must split
every column- and row-parallel weight and the attention heads, pipeline stages are cut between blocks,
micro-batches fill the per-replica batch, ZeRO / FSDP needs parameters to shard, context parallelism splits
the sequence of a flash-attention transformer. The builders in strategies/ assert what these rules guarantee.
"""
from __future__ import annotations

import simdist.strategies.mp_plan as mp_plan
import simdist.strategies.sharded_dp as sharded_dp
import simdist.strategies.sharding as sharding
import simdist.strategies.tensor_parallel as tensor_parallel
from simdist.errors import Issue
from simdist.io.rules_recompute import recompute_module_model_issues
from simdist.io.rules_training import ZERO_KEY, bad_value
from simdist.scenario import CpCommType, PipelineSchedule, Recompute, Scenario
from simdist.strategies.plan import data_parallel_degree, is_model_parallel, resolve_batch

TP_KEY = "training.parallelism.tp"
CP_KEY = "training.parallelism.cp"
EP_KEY = "training.parallelism.ep"
ETP_KEY = "training.parallelism.etp"
IMBALANCE_KEY = "training.moe_load_imbalance"


def tensor_parallel_issues(scenario: Scenario) -> list[Issue]:
    """tp > 1 splits transformer blocks: every column-parallel output and row-parallel input, and the heads."""
    model, tp = scenario.workload.model, scenario.training.parallelism.tp
    if tp == 1:
        return []
    roles = [tensor_parallel.layer_role(x) for x in model.layers]
    if tensor_parallel.TpRole.COLUMN not in roles:
        return [bad_value(TP_KEY, tp, f"1 for {model.name}: tensor parallelism splits transformer blocks ({{gpt: "
                                      "...}, {bert: ...} or a transformer catalog model)")]
    out = []
    shape = mp_plan.transformer_shape(model)
    if shape is not None and shape.heads % tp:
        out.append(bad_value(TP_KEY, tp, f"a divisor of the {shape.heads} attention heads"))
    for layer, role in zip(model.layers, roles):
        if role is tensor_parallel.TpRole.ROW:
            bad = [s[1] for s in layer.grad_shapes if len(s) == 2 and s[1] % tp]
            what = "input features"
        elif role is tensor_parallel.TpRole.COLUMN:
            bad = [s[0] for s in layer.grad_shapes if s[0] % tp]
            what = "output features"
        else:
            continue
        if bad:
            out.append(bad_value(TP_KEY, tp, f"a divisor of {layer.name}'s {what} ({bad[0]})"))
            break
    return out


def pipeline_issues(scenario: Scenario) -> list[Issue]:
    """One GPU kind; micro-batches that divide the per-replica batch (and, interleaved, a multiple of pp);
    pp x virtual_stages stages cut between transformer blocks; recomputation needs attention blocks."""
    s, t = scenario, scenario.training
    model, pp, v = s.workload.model, t.parallelism.pp, t.virtual_stages
    out = []
    gpus = {g.gpu.key for g in s.cluster.node_groups}
    if len(gpus) > 1:
        out.append(bad_value("cluster.nodes", sorted(gpus), "one GPU kind for tensor or pipeline parallelism "
                                                            "(mixed clusters run data parallelism only)"))
    if Recompute(t.recompute) is not Recompute.NONE and mp_plan.transformer_shape(model) is None:
        out.append(bad_value("training.recompute", t.recompute.value, "none for a model without attention blocks"))
    out += recompute_module_model_issues(s)
    replica = resolve_batch(s, data_parallel_degree(s)) * t.grad_accumulation  # (io.resolve: dp and the batch fit)
    if replica % t.micro_batch:
        out.append(bad_value("training.micro_batch", t.micro_batch, f"a divisor of the per-replica batch {replica}"))
    elif PipelineSchedule(t.schedule) is PipelineSchedule.INTERLEAVED and (replica // t.micro_batch) % pp:
        out.append(bad_value("training.schedule", t.schedule.value, f"a number of micro-batches "
                             f"({replica // t.micro_batch}) divisible by pp ({pp}) for interleaving"))
    if pp * v > 1:
        units = mp_plan.pipeline_units(model)
        if not units:
            out.append(bad_value("training.parallelism.pp", "> 1", f"1 for {model.name}: pipeline stages are cut "
                                                                   "between transformer blocks"))
        elif pp * v > len(units):
            out.append(bad_value("training.parallelism.pp", pp, f"pp x virtual_stages = {pp * v} at most the model's "
                                                                f"{len(units)} blocks"))
    return out


def context_parallel_issues(scenario: Scenario) -> list[Issue]:
    """cp > 1 splits the sequence of a transformer with flash attention (Transformer Engine runs context
    parallelism with its flash / fused attention backends only) into 2 cp chunks (the causal load balance);
    a2a scatters the heads and the K/V heads over tp x cp ranks."""
    t, model = scenario.training, scenario.workload.model
    cp = t.parallelism.cp
    if cp == 1:
        return []
    shape = mp_plan.transformer_shape(model)
    if shape is None:
        return [bad_value(CP_KEY, cp, f"1 for {model.name}: context parallelism splits the sequence of transformer "
                                      "blocks")]
    if not shape.flash_attention:
        return [bad_value(CP_KEY, cp, "1 without flash attention (Transformer Engine runs context parallelism with "
                                      "its flash or fused attention only): set workload.flash_attention: true")]
    out = []
    if shape.seq_len % (2 * cp):
        out.append(bad_value(CP_KEY, cp, f"a degree whose 2 x cp chunks divide the sequence length {shape.seq_len} "
                                         "(each rank holds two chunks for the causal load balance)"))
    if CpCommType(t.cp_comm_type) is CpCommType.A2A:
        tp, kv = t.parallelism.tp, shape.kv_heads or shape.heads
        for count, what in ((shape.heads, "attention heads"), (kv, "key/value heads")):
            if count % (tp * cp):
                out.append(bad_value("training.cp_comm_type", "a2a", f"p2p or all_gather: a2a scatters the heads "
                                     f"over tp x cp = {tp * cp} ranks, which do not divide the {count} {what}"))
                break
    return out


def expert_parallel_issues(scenario: Scenario) -> list[Issue]:
    """Expert parallelism as Megatron-Core checks it (megatron/training/arguments.py): ep and etp need a
    mixture-of-experts model, ep divides the experts, ep x etp divides tp x cp x dp (the expert ranks re-read a
    stage's GPUs), etp the experts' width, sequence parallelism with tp > 1; NCCL's point-to-point all-to-all,
    ZeRO at most 1 (the distributed optimizer); the load imbalance read only where the dispatch is uneven."""
    s, t = scenario, scenario.training
    par, moe = t.parallelism, s.workload.model.moe
    out = []
    if moe is None:
        for key, value, ok in ((EP_KEY, par.ep, 1), (ETP_KEY, par.etp, par.tp)):
            if value != ok:
                out.append(bad_value(key, value, f"{ok} for {s.workload.model.name}, which has no mixture-of-experts "
                                                 "layers"))
        if t.moe_load_imbalance != 1.0:
            out.append(bad_value(IMBALANCE_KEY, t.moe_load_imbalance, "1 (the default) for a model without "
                                                                     "mixture-of-experts layers"))
        return out
    dense = par.tp * par.cp * data_parallel_degree(s)
    if moe.experts % par.ep:
        out.append(bad_value(EP_KEY, par.ep, f"a divisor of the {moe.experts} routed experts"))
    if dense % (par.ep * par.etp):
        out.append(bad_value(EP_KEY, par.ep, f"a degree with ep x etp = {par.ep} x {par.etp} dividing a stage's "
                                             f"tp x cp x dp = {dense} GPUs (Megatron-Core's expert ranks)"))
    if moe.expert_ffn_hidden % par.etp:
        out.append(bad_value(ETP_KEY, par.etp, f"a divisor of the experts' width {moe.expert_ffn_hidden}"))
    if par.tp > 1 and not t.sequence_parallel:
        out.append(bad_value("training.sequence_parallel", False, "true: Megatron-Core runs a mixture-of-experts "
                                                                  "model under tp with sequence parallelism only"))
    if par.ep > 1 and s.communication.backend.value != "nccl":
        out.append(bad_value("communication.backend", s.communication.backend.value, "nccl with ep > 1 (the token "
                                                                                     "dispatch is NCCL's all-to-all)"))
    if (par.ep > 1 or par.etp != par.tp) and par.zero > 1:
        out.append(bad_value(ZERO_KEY, par.zero, "0 or 1 (Megatron-Core's distributed optimizer) with expert "
                                                 "parallelism"))
    if t.moe_load_imbalance != 1.0:
        if par.ep == 1:
            out.append(bad_value(IMBALANCE_KEY, t.moe_load_imbalance, "1 with ep 1: every GPU holds every expert"))
        elif moe.capacity_factor is not None:
            out.append(bad_value(IMBALANCE_KEY, t.moe_load_imbalance, "1 with a capacity factor: every expert "
                                                                      "takes exactly its capacity (padded)"))
        elif t.moe_load_imbalance > moe.experts:
            out.append(bad_value(IMBALANCE_KEY, t.moe_load_imbalance, f"at most the {moe.experts} experts (all "
                                                                      "tokens on one expert)"))
    return out


def zero_model_issues(scenario: Scenario) -> list[Issue]:
    """ZeRO / FSDP shards parameters; its recomputation is per transformer block."""
    t, model = scenario.training, scenario.workload.model
    if not t.parallelism.zero or is_model_parallel(scenario):
        return []
    units = sharding.fsdp_units(model)
    if not units:
        return [bad_value(ZERO_KEY, t.parallelism.zero, "0 for a model without parameters")]
    if t.recompute is not Recompute.NONE and not sharded_dp.block_units(model, units):
        return [bad_value("training.recompute", t.recompute.value, "none for a model without transformer blocks "
                                                                   "(recomputation is per block)")]
    return []


def model_parallel_issues(scenario: Scenario) -> list[Issue]:
    """Every rule of a training run's model-dependent parallelism (nothing for a benchmark)."""
    if scenario.workload.model is None:
        return []
    out = zero_model_issues(scenario)
    if is_model_parallel(scenario) or scenario.training.moe_load_imbalance != 1.0:
        out += expert_parallel_issues(scenario)
    if is_model_parallel(scenario):
        out += tensor_parallel_issues(scenario) + pipeline_issues(scenario) + context_parallel_issues(scenario)
    return out
