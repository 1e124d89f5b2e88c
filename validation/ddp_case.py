"""DDP training steps of a synthetic MLP, with communication hook none / fp16 / PowerSGD.

One bucket holds every gradient (bucket_cap_mb >= model size): PowerSGD with several buckets
deadlocks on gloo (notes, pitfall 6), and one DDP model on the default group per process, so each
DDP case is its own launch (DDP models on one-rank groups have no peer to deadlock with).
The compute-only step (same model, no DDP, all ranks at once) is timed first; then the DDP steps;
then the same DDP steps on a one-rank process group per rank ("local": DDP's bucket copies and the
hook's encode/decode, no network), so that step = compute + codec + communication can be split as
codec = local - compute and communication = step - local (what `simdist calibrate` fits codecs from).
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable

import torch
import torch.distributed as dist
from torch import nn

from validation.cases import Case, DdpHook
from validation.timing import summarize, timed_max


def build_mlp(hidden: int, depth: int) -> nn.Module:
    layers: list[nn.Module] = []
    for i in range(depth):
        layers.append(nn.Linear(hidden, hidden))
        if i < depth - 1:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _register_hook(model: nn.parallel.DistributedDataParallel, case: Case, group: object = None) -> None:
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    if case.hook is DdpHook.FP16:
        model.register_comm_hook(group, default_hooks.fp16_compress_hook)
    elif case.hook is DdpHook.POWERSGD:
        state = powerSGD_hook.PowerSGDState(
            process_group=group, matrix_approximation_rank=case.powersgd_rank, start_powerSGD_iter=2,
            use_error_feedback=True, warm_start=True, random_seed=0)
        model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)


def _own_group() -> object:
    """This rank's one-rank process group (every rank creates all of them, in the same order)."""
    mine = None
    for r in range(dist.get_world_size()):
        group = dist.new_group([r])
        if r == dist.get_rank():
            mine = group
    return mine


def _mlp_step(case: Case, device: str, wrap: Callable[[nn.Module], nn.Module] = lambda m: m) -> Callable[[], None]:
    """One SGD step of the case's MLP (seeded, synthetic batch), the model wrapped by `wrap`."""
    torch.manual_seed(0)
    model = wrap(build_mlp(case.hidden, case.depth).to(device))
    x = torch.randn(case.batch, case.hidden, device=device)
    y = torch.randn(case.batch, case.hidden, device=device)
    loss_fn = nn.MSELoss()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    return step


def _ddp(case: Case, device: str, hook: DdpHook, group: object = None) -> Callable[[nn.Module], nn.Module]:
    """Wraps a module in DDP on `group` (None: the default group) with one bucket and `hook`."""
    bucket_mb = math.ceil(case.ddp_params * 4 / 2**20) + 1
    device_ids = [torch.device(device).index or 0] if device.startswith("cuda") else None

    def wrap(m: nn.Module) -> nn.Module:
        ddp = nn.parallel.DistributedDataParallel(m, device_ids=device_ids, bucket_cap_mb=bucket_mb, process_group=group)
        _register_hook(ddp, replace(case, hook=hook), group)
        return ddp

    return wrap


def _codec_s(local: dict[str, object], base: dict[str, object]) -> float:
    return max(0.0, float(local["median_s"]) - float(base["median_s"]))  # type: ignore[arg-type]


def run_ddp_case(case: Case, device: str, sync: Callable[[], None]) -> dict[str, object]:
    """Time compute-only, DDP and one-rank-group DDP steps; returns {case, params, grad_bytes, compute,
    step, local, codec_s}."""
    own = _own_group()
    compute = summarize(timed_max(_mlp_step(case, device), case.warmup, case.reps, sync))
    steps = summarize(timed_max(_mlp_step(case, device, _ddp(case, device, case.hook)), case.warmup, case.reps, sync))
    # The same steps with no network, on this rank's own group: a second DDP on the default group can hang
    # with PowerSGD (pitfall 6); a one-rank group has no peer to disagree with.
    local = summarize(timed_max(_mlp_step(case, device, _ddp(case, device, case.hook, own)), case.warmup, case.reps, sync))
    params = case.ddp_params
    return {"case": case.to_dict(), "label": case.label, "params": params, "grad_bytes": params * 4,
            "bucket_cap_mb": math.ceil(params * 4 / 2**20) + 1, "compute": compute, "step": steps, "local": local,
            "codec_s": _codec_s(local, compute), "points": [{"size_bytes": float(params * 4), **steps}]}


def run_codec_case(case: Case, device: str, sync: Callable[[], None]) -> dict[str, object]:
    """The codec probe: compute-only steps, then one-rank-group DDP steps with each hook, interleaved
    (none, fp16, powersgd, none, ...) so that drifts of a shared CPU fall on every hook alike.

    codec_s[hook] = local[hook] - local[none]: what the hook adds to DDP's own bucket copies, the figure
    simdist's codec cost model predicts (it charges nothing for an uncompressed bucket).
    """
    own = _own_group()
    compute = summarize(timed_max(_mlp_step(case, device), case.warmup, case.reps, sync))
    steps = {str(h): _mlp_step(case, device, _ddp(case, device, h, own)) for h in DdpHook}
    for step in steps.values():
        timed_max(step, 0, case.warmup, sync)  # PowerSGD compresses from its 2nd step on
    times: dict[str, list[float]] = {h: [] for h in steps}
    for _ in range(case.reps):
        for h, step in steps.items():
            times[h] += timed_max(step, 0, 1, sync)
    local = {h: summarize(t) for h, t in times.items()}
    params = case.ddp_params
    return {"case": case.to_dict(), "label": case.label, "params": params, "grad_bytes": params * 4,
            "compute": compute, "local": local,
            "codec_s": {h: _codec_s(t, local["none"]) for h, t in local.items()},
            "points": [{"size_bytes": float(params * 4), "hook": h, **t} for h, t in local.items()]}
