"""Fine-tuning keys: training.finetune (LoRA) and workload.packed_sequences, applied to the resolved model and
checked against what the run can price.

`finetune_model` turns the workload's model into the one trained: its documents packed (simdist.finetune) and,
under LoRA, its weights frozen with adapters added (simdist.workload.lora). `finetune_issues` refuses what the
plans do not yet price for frozen layers (context or expert parallelism, ZeRO-3 under tp or pp); data
parallelism with or without ZeRO / FSDP, and tp x pp x dp (strategies.tensor_parallel places the adapters as
Megatron-Bridge does) honour them.
"""
from __future__ import annotations

from dataclasses import replace

import simdist.strategies.tensor_parallel as tensor_parallel  # lazy (simdist.LAZY_MODULES): read only under tp > 1
from simdist.errors import Issue
from simdist.finetune import is_attention_core, pack_documents
from simdist.io.resolve_workload import resolve_model
from simdist.io.rules_training import bad_value
from simdist.scenario import Scenario, WorkloadSpec
from simdist.strategies.plan import is_model_parallel
from simdist.workload.lora import LoraSpec, apply_lora, expand_targets

FULL_IS_TRAINING = ("'lora'; full fine-tuning trains every weight, which is what a run without training.finetune "
                    "prices (the same numbers): remove the key")


def _packed(m, workload: WorkloadSpec, issues: list[Issue]):
    """The model with its attention per packed document, or None with the reasons appended."""
    path, model = "workload.packed_sequences", workload.model
    tokens = m.workload.packed_sequences.document_tokens
    s = model.tokens_per_sample
    if model.family != "transformer" or s is None:
        issues.append(Issue(path, f"{model.name} is not a transformer: packing documents changes its attention only"))
        return None
    if tokens >= s or s % tokens:
        issues.append(Issue(f"{path}.document_tokens", f"got {tokens}; expected a divisor of seq_len ({s}) below it "
                                                        "(seq_len / document_tokens documents per sample)"))
        return None
    if any(is_attention_core(x) and x.fwd_kernels for x in model.layers):
        issues.append(Issue(path, "needs flash attention (workload.flash_attention: true): per-document attention "
                                  "runs as flash attention's varlen kernels; without them a packed sample runs the "
                                  "whole s x s attention under a block-diagonal mask, the same cost as unpacked"))
        return None
    found: list[Issue] = []
    document_model = resolve_model(m.workload.model_copy(update={"seq_len": tokens}), found)
    if document_model is None:
        issues.extend(Issue(f"{path}.document_tokens", i.message) for i in found)
        return None
    return pack_documents(model, s // tokens, document_model)


def _lora(m, model, issues: list[Issue]):
    ft, path = m.training.finetune, "training.finetune"
    if ft.method == "full":
        issues.append(Issue(f"{path}.method", f"got 'full'; expected {FULL_IS_TRAINING}"))
        return None
    if ft.rank is None:
        issues.append(Issue(f"{path}.rank", "required key is missing (the adapters' rank r: Megatron-Bridge's "
                                            "LoRA `dim`, PEFT's `r`)"))
        return None
    try:
        targets = expand_targets(ft.target_modules) if ft.target_modules is not None else LoraSpec(1).targets
        return apply_lora(model, LoraSpec(ft.rank, targets))
    except ValueError as err:
        issues.append(Issue(f"{path}.target_modules", str(err)))
    return None


def finetune_model(m, workload: WorkloadSpec | None, issues: list[Issue]) -> WorkloadSpec | None:
    """`workload` (resolved from ScenarioModel `m`) with its model packed and LoRA-adapted as the keys ask."""
    packed, ft = m.workload.packed_sequences, m.training.finetune
    if packed is None and ft is None:
        return workload
    if workload is None:
        return None
    if workload.model is None:
        for key, v in (("workload.packed_sequences", packed), ("training.finetune", ft)):
            if v is not None:
                issues.append(Issue(key, "a collective benchmark trains no model: remove the key"))
        return workload
    model = workload.model
    if packed is not None:
        model = _packed(m, workload, issues)
    if ft is not None and model is not None:
        model = _lora(m, model, issues)
    return None if model is None else replace(workload, model=model)


def finetune_issues(scenario: Scenario) -> list[Issue]:
    """LoRA (frozen layers in the model) with what the model-parallel plan does not yet price for frozen layers:
    expert parallelism or a mixture-of-experts model, an adapter rank the tp group cannot split (Megatron's
    ColumnParallelLinear divides A's r outputs over tp), and a frozen linear whose split width tp does not divide."""
    model = scenario.workload.model
    if model is None or not any(x.frozen for x in model.layers):
        return []
    par, out, path = scenario.training.parallelism, [], "training.finetune"
    if not is_model_parallel(scenario):
        return []
    if par.ep > 1 or model.moe is not None:
        out.append(Issue(path, "LoRA on a mixture-of-experts model (or with ep > 1): not modelled (the plan does "
                         "not place adapters beside the experts); run LoRA on a dense model"))
    if par.tp > 1:
        out += _frozen_split_issues(model, par.tp)
    rank = next((x.grad_shapes[0][0] for x in model.layers if x.name.endswith(".lora_a")), None)
    if rank is not None and par.tp > 1 and rank % par.tp:
        out.append(Issue(f"{path}.rank", f"got {rank}; expected a multiple of tp ({par.tp}): Megatron-Bridge's "
                         "LoRA splits A's r outputs over the tp group beside linear_qkv and linear_fc1 "
                         "(ColumnParallelLinear)"))
    return out


def _frozen_split_issues(model, tp: int) -> list[Issue]:
    """A frozen block linear's split dimension tp does not divide (rules_parallel checks the trainable ones by
    their gradient shapes, which a frozen layer lacks): its width read off its activations per token."""
    tokens = model.tokens_per_sample or 1
    for x in model.layers:
        role = tensor_parallel.layer_role(x)
        column, row = tensor_parallel.TpRole.COLUMN, tensor_parallel.TpRole.ROW
        if not x.frozen or x.kind != "linear" or role not in (column, row):
            continue
        n = int(round((x.output_elems if role is column else x.input_elems) / tokens))
        if n % tp:
            what = "output features" if role is column else "input features"
            return [bad_value("training.parallelism.tp", tp, f"a divisor of {x.name}'s {what} ({n})")]
    return []
