"""DDP training steps of a synthetic MLP, with communication hook none / fp16 / PowerSGD.

One bucket holds every gradient unless the case sets `bucket_mb` (DDP's bucket_cap_mb; never with
PowerSGD, whose hook deadlocks on gloo with several buckets: notes, pitfall 6), and one DDP model on
the default group per process, so each DDP case is its own launch (DDP models on one-rank groups have
no peer to deadlock with).
The compute-only step (same model, no DDP, all ranks at once) is timed first; then the DDP steps;
then the same DDP steps on a one-rank process group per rank ("local": DDP's bucket copies and the
hook's encode/decode, no network), so that step = compute + codec + communication can be split as
codec = local - compute and communication = step - local. The codec's cost `simdist calibrate` fits is
timed inside the DDP steps themselves (`codec_in_step_s`: each hook's span minus its collectives' spans,
validation/hook_timing.py): outside the step, the hooks do not run as they do in it.
"""
from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Callable

import torch
import torch.distributed as dist
from torch import nn

from simdist.validation.cases import PROBE_RATIO, RATIO_HOOKS, Case, DdpHook
from simdist.validation.hook_timing import CollectiveLog, in_hooks, merged_timeline, split_step
from simdist.validation.timing import summarize, timed_max


def build_mlp(hidden: int, depth: int) -> nn.Module:
    layers: list[nn.Module] = []
    for i in range(depth):
        layers.append(nn.Linear(hidden, hidden))
        if i < depth - 1:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _register_hook(model: nn.parallel.DistributedDataParallel, case: Case, group: object = None,
                   clock: PhaseClock | None = None) -> None:
    """The case's hook (simdist.validation.hooks.hook_for: torch's own for none / fp16 / bf16 / PowerSGD, simdist's
    codecs otherwise), timed by `clock`. Without a clock, hook none is DDP's built-in all_reduce."""
    from simdist.validation.hooks import hook_for

    if case.hook is DdpHook.NONE and clock is None:
        return
    params: dict[str, object] = {"error_feedback": case.error_feedback}
    if case.hook is DdpHook.POWERSGD:
        params |= {"rank": case.powersgd_rank, "start_powerSGD_iter": 2}
    if case.hook in RATIO_HOOKS:
        params["ratio"] = case.ratio or PROBE_RATIO
    state, hook = hook_for(str(case.hook), group, seed=0, **params)
    model.register_comm_hook(state, clock.wrap_hook(hook) if clock is not None else hook)


# Process groups and DDP models this worker made, kept until it exits. Dropping the last reference to one
# from a gloo worker thread (a hook's future callback, or the cyclic GC running there) destroys a
# ProcessGroupGloo on its own thread, which joins itself and aborts the rank ("Resource deadlock avoided").
_KEPT: list[object] = []
_OWN_GROUP: list[object] = []


def _own_group() -> object:
    """This rank's one-rank process group, made once per worker (every rank creates all of them, in the
    same order, on its first call)."""
    if not _OWN_GROUP:
        groups = [dist.new_group([r]) for r in range(dist.get_world_size())]
        _KEPT.extend(groups)
        _OWN_GROUP.append(groups[dist.get_rank()])
    return _OWN_GROUP[0]


class PhaseClock:
    """Phases of each step: forward, backward (with DDP: until every bucket is reduced), optimizer, per
    bucket its communication (the hook's call to its future's completion, from the backward's start) and,
    with a CollectiveLog patched in, the hooks' in-step codec time (validation/hook_timing.py)."""

    def __init__(self, sync: Callable[[], None], log: CollectiveLog | None = None) -> None:
        self.sync = sync
        self.log = log
        self.steps: list[tuple[float, float, float, dict[int, tuple[float, float]], tuple[dict, list]]] = []
        self._buckets: dict[int, tuple[float, float]] = {}
        self._spans: dict[int, tuple[float, float]] = {}
        self._bwd_start = 0.0

    def wrap_hook(self, hook: Callable) -> Callable:
        """`hook` (a DDP communication hook) that also records when its bucket's communication ran."""
        def timed(state: object, bucket: object) -> object:
            start = time.perf_counter()
            index = bucket.index()  # type: ignore[attr-defined]

            def done(fut: object) -> object:
                end = time.perf_counter()
                self._buckets[index] = (start - self._bwd_start, end - start)
                self._spans[index] = (start, end)
                return fut.value()  # type: ignore[attr-defined]

            return hook(state, bucket).then(done)  # type: ignore[attr-defined]

        timed.__annotations__ = {}  # DDP accepts a hook whose `bucket` is unannotated or a real dist.GradBucket
        return timed

    def step(self, forward: Callable[[], torch.Tensor], optimizer: Callable[[], None]) -> None:
        self._buckets, self._spans = {}, {}
        if self.log is not None:
            self.log.clear()
        t0 = time.perf_counter()
        loss = forward()
        self.sync()
        self._bwd_start = t1 = time.perf_counter()
        loss.backward()
        self.sync()
        t2 = time.perf_counter()
        optimizer()
        self.sync()
        spans = {i: (a - t0, b - t0) for i, (a, b) in self._spans.items()}  # from the step's start (a barrier)
        colls = [(a - t0, b - t0) for a, b in in_hooks(self._spans.values(), self.log.spans())] if self.log else []
        self.steps.append((t1 - t0, t2 - t1, time.perf_counter() - t2, dict(self._buckets), (spans, colls)))

    def _hook_split(self, steps: list, nb: int) -> list[tuple[dict, dict]]:
        """Per step: (the split of the merged timeline over ranks, the split of this rank's own spans)."""
        n = torch.tensor([max((len(c) for *_, (_, c) in steps), default=0)], dtype=torch.float64)
        dist.all_reduce(n, op=dist.ReduceOp.MAX)
        nc = int(n.item())
        inf = math.inf
        late = torch.tensor([[x for i in range(nb) for x in spans.get(i, (0.0, 0.0))]
                             + [b for _, b in c] + [-inf] * (nc - len(c)) for *_, (spans, c) in steps], dtype=torch.float64)
        short = torch.tensor([[b - a for a, b in c] + [inf] * (nc - len(c)) for *_, (_, c) in steps], dtype=torch.float64)
        if late.numel():
            dist.all_reduce(late, op=dist.ReduceOp.MAX)
        if nc:
            dist.all_reduce(short, op=dist.ReduceOp.MIN)
        out = []
        for (*_, (spans, colls)), lt, sh in zip(steps, late.tolist(), short.tolist()):
            hooks, transfers = merged_timeline(lt[0:2 * nb:2], lt[1:2 * nb:2], lt[2 * nb:], sh)
            out.append((split_step(hooks, transfers), split_step(spans, colls)))
        return out

    def summary(self, reps: int) -> dict[str, object]:
        """The last `reps` steps, each phase the MAX over ranks (an untimed all_reduce), summarized; with a
        CollectiveLog also `codec`, `collectives` and `codec_own` per step and each bucket's `codec`."""
        steps = self.steps[-reps:]
        nb = max((len(s[3]) for s in steps), default=0)
        timed = self.log is not None
        splits = self._hook_split(steps, nb) if timed else [None] * len(steps)
        rows = []
        for (f, b, o, buckets, _), split in zip(steps, splits):
            row = [f, b, o] + [x for i in range(nb) for x in buckets.get(i, (0.0, 0.0))]
            if split is not None:
                crit, own = split
                row += [crit["codec"], crit["collectives"], own["codec"]] + [crit["bucket_codec"].get(i, 0.0) for i in range(nb)]
            rows.append(row)
        t = torch.tensor(rows, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        cols = t.T.tolist()
        out: dict[str, object] = {name: summarize(cols[i]) for i, name in enumerate(("forward", "backward", "optimizer"))}
        out["buckets"] = [{"index": i, "start_s": summarize(cols[3 + 2 * i])["median_s"],
                           "comm": summarize(cols[4 + 2 * i])} for i in range(nb)]
        if timed:
            k = 3 + 2 * nb
            out["codec"], out["collectives"], out["codec_own"] = (summarize(cols[k + j]) for j in range(3))
            for i, b in enumerate(out["buckets"]):  # type: ignore[arg-type]
                b["codec"] = summarize(cols[k + 3 + i])
        return out


def _mlp_step(case: Case, device: str, wrap: Callable[[nn.Module], nn.Module] = lambda m: m,
              clock: PhaseClock | None = None) -> Callable[[], None]:
    """One SGD step of the case's MLP (seeded, synthetic batch), the model wrapped by `wrap`; with
    `clock`, the step's phases are recorded there."""
    torch.manual_seed(0)
    model = wrap(build_mlp(case.hidden, case.depth).to(device))
    x = torch.randn(case.batch, case.hidden, device=device)
    y = torch.randn(case.batch, case.hidden, device=device)
    loss_fn = nn.MSELoss()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def forward() -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        return loss_fn(model(x), y)

    def step() -> None:
        if clock is not None:
            clock.step(forward, opt.step)
        else:
            forward().backward()
            opt.step()

    return step


def _ddp(case: Case, device: str, hook: DdpHook, group: object = None,
         clock: PhaseClock | None = None) -> Callable[[nn.Module], nn.Module]:
    """Wraps a module in DDP on `group` (None: the default group) with the case's buckets (`bucket_mb`, 0: one
    holding every gradient) and `hook` (timed by `clock`)."""
    bucket_mb = case.bucket_mb or _one_bucket_mb(case)
    device_ids = [torch.device(device).index or 0] if device.startswith("cuda") else None

    def wrap(m: nn.Module) -> nn.Module:
        ddp = nn.parallel.DistributedDataParallel(m, device_ids=device_ids, bucket_cap_mb=bucket_mb, process_group=group)
        _register_hook(ddp, replace(case, hook=hook), group, clock)
        _KEPT.append(ddp)
        return ddp

    return wrap


def _one_bucket_mb(case: Case) -> int:
    return math.ceil(case.ddp_params * 4 / 2**20) + 1


def _bucket_bytes(case: Case) -> list[int]:
    """The bytes of each bucket DDP forms (its own assignment function, as DDP calls it with an explicit cap)."""
    params = list(build_mlp(case.hidden, case.depth).parameters())[::-1]
    cap = int((case.bucket_mb or _one_bucket_mb(case)) * 2**20)
    indices, _ = dist._compute_bucket_assignment_by_size(params, [cap], [False] * len(params))
    return [sum(params[i].numel() * params[i].element_size() for i in b) for b in indices]


def _codec_s(local: dict[str, object], base: dict[str, object]) -> float:
    return max(0.0, float(local["median_s"]) - float(base["median_s"]))  # type: ignore[arg-type]


def run_ddp_case(case: Case, device: str, sync: Callable[[], None]) -> dict[str, object]:
    """Time compute-only, DDP and one-rank-group DDP steps; returns {case, params, grad_bytes, compute,
    step, phases (forward, backward, optimizer, codec, collectives, buckets: [{index, start_s, comm, codec}]
    of the DDP steps), local, codec_s (local - compute), codec_in_step_s (the hooks' own time inside the DDP
    steps, collectives excluded: validation/hook_timing.py; what `simdist calibrate` fits codecs from)}."""
    own = _own_group()
    compute = summarize(timed_max(_mlp_step(case, device), case.warmup, case.reps, sync))
    log = CollectiveLog()
    clock = PhaseClock(sync, log)
    step = _mlp_step(case, device, _ddp(case, device, case.hook, clock=clock), clock)
    with log.patched():  # the hooks' collectives are timed, so their encode/decode is timed in the step
        steps = summarize(timed_max(step, case.warmup, case.reps, sync))
    phases = clock.summary(case.reps)
    # The same steps with no network, on this rank's own group: a second DDP on the default group can hang
    # with PowerSGD (pitfall 6); a one-rank group has no peer to disagree with.
    local = summarize(timed_max(_mlp_step(case, device, _ddp(case, device, case.hook, own)), case.warmup, case.reps, sync))
    params = case.ddp_params
    return {"case": case.to_dict(), "label": case.label, "params": params, "grad_bytes": params * 4,
            "bucket_cap_mb": case.bucket_mb or _one_bucket_mb(case), "bucket_bytes": _bucket_bytes(case),
            "compute": compute, "step": steps, "phases": phases, "local": local,
            "codec_s": _codec_s(local, compute), "codec_in_step_s": phases["codec"]["median_s"],  # type: ignore[index]
            "points": [{"size_bytes": float(params * 4), **steps}]}


def run_codec_case(case: Case, device: str, sync: Callable[[], None]) -> dict[str, object]:
    """The codec probe: compute-only steps, then one-rank-group DDP steps with each hook, interleaved
    (none, fp16, bf16, ..., powersgd, none, ...) so that drifts of a shared CPU fall on every hook alike.

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
