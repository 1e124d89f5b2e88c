"""DDP training steps of a synthetic MLP, with communication hook none / fp16 / PowerSGD.

One bucket holds every gradient (bucket_cap_mb >= model size): PowerSGD with several buckets
deadlocks on gloo (notes, pitfall 6), and one DDP model per process, so each hook is its own launch.
The compute-only step (same model, no DDP, all ranks at once) is timed first, for the step model
step = compute + communication.
"""
from __future__ import annotations

import math
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


def _register_hook(model: nn.parallel.DistributedDataParallel, case: Case) -> None:
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    if case.hook is DdpHook.FP16:
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif case.hook is DdpHook.POWERSGD:
        state = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=case.powersgd_rank, start_powerSGD_iter=2,
            use_error_feedback=True, warm_start=True, random_seed=0)
        model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)


def run_ddp_case(case: Case, device: str, sync: Callable[[], None]) -> dict[str, object]:
    """Time compute-only steps, then DDP steps; returns {case, params, grad_bytes, compute, step}."""
    torch.manual_seed(0)
    model = build_mlp(case.hidden, case.depth).to(device)
    x = torch.randn(case.batch, case.hidden, device=device)
    y = torch.randn(case.batch, case.hidden, device=device)
    loss_fn = nn.MSELoss()
    params = sum(p.numel() for p in model.parameters())

    def make_step(m: nn.Module) -> Callable[[], None]:
        opt = torch.optim.SGD(m.parameters(), lr=1e-3)

        def step() -> None:
            opt.zero_grad(set_to_none=True)
            loss_fn(m(x), y).backward()
            opt.step()

        return step

    compute = timed_max(make_step(model), case.warmup, case.reps, sync)
    bucket_mb = math.ceil(params * 4 / 2**20) + 1
    ddp = nn.parallel.DistributedDataParallel(
        model, device_ids=[torch.device(device).index or 0] if device.startswith("cuda") else None,
        bucket_cap_mb=bucket_mb)
    _register_hook(ddp, case)
    steps = timed_max(make_step(ddp), case.warmup, case.reps, sync)
    return {"case": case.to_dict(), "label": case.label, "params": params, "grad_bytes": params * 4,
            "bucket_cap_mb": bucket_mb, "compute": summarize(compute), "step": summarize(steps),
            "points": [{"size_bytes": float(params * 4), **summarize(steps)}]}
