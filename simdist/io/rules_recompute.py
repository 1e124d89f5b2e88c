"""The rules of training.recompute_modules (Megatron-Core's --recompute-modules under --recompute-granularity
selective): the names simdist's block model expresses (strategies.recompute_policy.MODULE_LAYERS), only with
recompute selective, only on the model-parallel plan, and each module present in the model it recomputes."""
from __future__ import annotations

from simdist.errors import Issue
from simdist.scenario import Recompute, Scenario
from simdist.strategies.recompute_policy import (EXPERT_KERNEL_MODULES, MODULE_LAYERS, MOE_LAYER_MODULE,
                                                 recomputes_layer)

_MODELLED = (*MODULE_LAYERS, *EXPERT_KERNEL_MODULES, MOE_LAYER_MODULE)

_KEY = "training.recompute_modules"


def recompute_module_issues(t) -> list[Issue]:
    """The key as given (schema's training model): refused unless recompute is selective on a model-parallel
    layout, and for names simdist does not model or repeats."""
    names = t.recompute_modules
    if names is None:
        return []
    out = []
    if Recompute(t.recompute) is not Recompute.SELECTIVE:
        out.append(Issue(_KEY, f"got {names!r}; read only with training.recompute: selective (got "
                               f"'{Recompute(t.recompute).value}')"))
    p = t.parallelism
    if p.tp == 1 and p.pp == 1 and p.cp == 1 and p.ep == 1:
        out.append(Issue(_KEY, f"got {names!r}; modelled for model-parallel layouts (tp, pp, cp or ep > 1); "
                               "ZeRO / FSDP data parallelism recomputes core_attn only (leave the key unset)"))
    if not names:
        out.append(Issue(_KEY, "got []; expected at least one module (unset: core_attn)"))
    for n in names:
        if n not in _MODELLED:
            out.append(Issue(_KEY, f"got '{n}'; expected Megatron-Core module names among {', '.join(_MODELLED)}"))
    if len(set(names)) != len(names):
        out.append(Issue(_KEY, f"got {names!r}; each module once"))
    return out


def recompute_module_model_issues(scenario: Scenario) -> list[Issue]:
    """Each listed module recomputes something in this model: mla_up_proj needs multi-head latent attention,
    mlp a block with a dense MLP (a MoE-only model has none), shared_experts a MoE block with shared experts,
    moe_act and moe (the whole MoE layer) routed experts."""
    model, out = scenario.workload.model, []
    names = [x.name for x in model.layers]
    for n in scenario.training.recompute_modules:
        if n in MODULE_LAYERS and not any(recomputes_layer(x, (n,)) for x in names):
            out.append(Issue(_KEY, f"got '{n}'; {model.name} has no layer it recomputes"))
        if (n in EXPERT_KERNEL_MODULES or n == MOE_LAYER_MODULE) and not any(x.experts for x in model.layers):
            out.append(Issue(_KEY, f"got '{n}'; {model.name} has no routed experts"))
        if n == "mla_up_proj" and not any(x.endswith("attn.kv_down") for x in names):
            out.append(Issue(_KEY, f"got 'mla_up_proj'; {model.name} has no multi-head latent attention"))
    return out
