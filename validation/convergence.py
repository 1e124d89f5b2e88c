"""Measured convergence factors: iterations a small real model needs to reach a target loss under each
codec and sync mode, relative to uncompressed BSP, with N workers simulated in one process.

Each worker computes its gradient on its own shard of the batch; the codec runs exactly as the DDP hook
does (simdist.validation.hooks exchanges, driven in lock-step). The factor is what a scenario may copy into
`training.convergence_factor`. See docs/convergence.md for the method and its caveats.

    python -m simdist.validation.convergence [--workers 8] [--seeds 3] [--json] [--out F]
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import statistics
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Sequence

import torch

from simdist.scenario import CompressionMethod, SyncMode
from simdist.validation.hooks import GradCodec, codec_for, run_lockstep


@dataclass(frozen=True)
class TaskSpec:
    """Teacher-student classification: x ~ N(0, I), label = argmax of a fixed random teacher MLP; the
    student is a one-hidden-layer MLP trained by plain SGD on cross-entropy. The target of a seed is the
    eval loss uncompressed BSP reaches after `target_iters` iterations (so that every seed's baseline
    needs about the same number of iterations); a run that does not reach it in `max_iters` fails."""

    dim: int = 16
    hidden: int = 64
    classes: int = 4
    teacher_hidden: int = 16
    batch_per_worker: int = 16
    lr: float = 0.5
    eval_size: int = 2048
    target_iters: int = 100
    max_iters: int = 1000

    @property
    def shapes(self) -> list[tuple[int, ...]]:
        """Parameter shapes as nn.Linear stores them; the flat gradient is one DDP bucket."""
        return [(self.hidden, self.dim), (self.hidden,), (self.classes, self.hidden), (self.classes,)]

    @property
    def params(self) -> int:
        return sum(math.prod(s) for s in self.shapes)


@dataclass(frozen=True)
class CodecSetting:
    """A codec as a scenario's communication.compression states it."""

    method: CompressionMethod = CompressionMethod.NONE
    ratio: float | None = None
    rank: int | None = None
    error_feedback: bool = True

    @property
    def label(self) -> str:
        extra = f" {self.ratio:g}" if self.ratio is not None else f" r{self.rank}" if self.rank else ""
        ef = "" if self.error_feedback or self.method in _NO_EF else " no-EF"
        return f"{self.method.value}{extra}{ef}"

    def make(self, seed: int) -> GradCodec:
        params: dict[str, Any] = {"error_feedback": self.error_feedback}
        if self.ratio is not None:
            params["ratio"] = self.ratio
        if self.rank is not None:
            params["rank"] = self.rank
        return codec_for(self.method, seed=seed, **params)


_NO_EF = {CompressionMethod.NONE, CompressionMethod.FP16, CompressionMethod.BF16, CompressionMethod.INT8}


@dataclass(frozen=True)
class SyncSetting:
    """training.sync with its staleness (ssp) or local_steps (local_sgd)."""

    mode: SyncMode = SyncMode.BSP
    staleness: int = 0
    local_steps: int = 1

    @property
    def label(self) -> str:
        return {SyncMode.SSP: f"ssp s={self.staleness}", SyncMode.LOCAL_SGD: f"local_sgd H={self.local_steps}"}.get(
            self.mode, self.mode.value)


DEFAULT_CODECS = (
    CodecSetting(), CodecSetting(CompressionMethod.FP16), CodecSetting(CompressionMethod.BF16),
    CodecSetting(CompressionMethod.INT8), CodecSetting(CompressionMethod.ONEBIT),
    CodecSetting(CompressionMethod.ONEBIT, error_feedback=False),
    CodecSetting(CompressionMethod.TOPK, ratio=0.01), CodecSetting(CompressionMethod.TOPK, ratio=0.01, error_feedback=False),
    CodecSetting(CompressionMethod.TOPK, ratio=0.1), CodecSetting(CompressionMethod.RANDOMK, ratio=0.1),
    CodecSetting(CompressionMethod.POWERSGD, rank=1), CodecSetting(CompressionMethod.POWERSGD, rank=4),
)
DEFAULT_SYNCS = (
    SyncSetting(), SyncSetting(SyncMode.ASP), SyncSetting(SyncMode.SSP, staleness=2),
    SyncSetting(SyncMode.SSP, staleness=8), SyncSetting(SyncMode.LOCAL_SGD, local_steps=4),
    SyncSetting(SyncMode.LOCAL_SGD, local_steps=16),
)


# -- the model ----------------------------------------------------------------------------------------
def _unflatten(theta: torch.Tensor, task: TaskSpec) -> list[torch.Tensor]:
    """Views of [..., P] flat parameters as [..., *shape] per layer."""
    lead = theta.shape[:-1]
    return [t.reshape(*lead, *s) for t, s in zip(theta.split([math.prod(s) for s in task.shapes], -1), task.shapes)]


def _logits(theta: torch.Tensor, x: torch.Tensor, task: TaskSpec) -> torch.Tensor:
    """theta [N, P], x [N, b, d] -> logits [N, b, C]: each worker's student on its own shard."""
    w1, b1, w2, b2 = _unflatten(theta, task)
    h = torch.relu(x @ w1.transpose(-1, -2) + b1.unsqueeze(-2))
    return h @ w2.transpose(-1, -2) + b2.unsqueeze(-2)


def worker_grads(theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor, task: TaskSpec) -> torch.Tensor:
    """Per-worker flat gradients [N, P] of each worker's mean cross-entropy at its own parameters."""
    th = theta.detach().clone().requires_grad_(True)
    logits = _logits(th, x, task)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, task.classes), y.reshape(-1), reduction="none")
    loss.view(y.shape).mean(1).sum().backward()
    assert th.grad is not None
    return th.grad


@dataclass
class Problem:
    """The seeded teacher, initial student and data stream of one run."""

    task: TaskSpec
    seed: int
    n_workers: int
    theta0: torch.Tensor = field(init=False)
    eval_x: torch.Tensor = field(init=False)
    eval_y: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        t = self.task
        g = torch.Generator().manual_seed(1000 + self.seed)
        self._t1 = torch.randn(t.teacher_hidden, t.dim, generator=g)
        self._t2 = torch.randn(t.classes, t.teacher_hidden, generator=g)
        w1 = torch.randn(t.hidden, t.dim, generator=g) / math.sqrt(t.dim)
        w2 = torch.randn(t.classes, t.hidden, generator=g) / math.sqrt(t.hidden)
        self.theta0 = torch.cat([w1.reshape(-1), torch.zeros(t.hidden), w2.reshape(-1), torch.zeros(t.classes)])
        self.eval_x, self.eval_y = self._sample(t.eval_size, g)
        self._data_seed = 2000 + self.seed

    def _sample(self, n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(n, self.task.dim, generator=g)
        return x, (torch.relu(x @ self._t1.T) @ self._t2.T).argmax(-1)

    def batch(self, it: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Iteration `it`'s global batch, one shard per worker: x [N, b, d], y [N, b]."""
        x, y = self._sample(self.n_workers * self.task.batch_per_worker,
                            torch.Generator().manual_seed(self._data_seed * 1_000_003 + it))
        return x.view(self.n_workers, -1, self.task.dim), y.view(self.n_workers, -1)

    def eval_loss(self, theta: torch.Tensor) -> float:
        with torch.no_grad():
            logits = _logits(theta.unsqueeze(0), self.eval_x.unsqueeze(0), self.task)[0]
            return float(torch.nn.functional.cross_entropy(logits, self.eval_y))


# -- the sync modes -----------------------------------------------------------------------------------
def losses(task: TaskSpec, codec: CodecSetting, sync: SyncSetting, n_workers: int, seed: int) -> Iterator[float]:
    """The eval loss after each iteration (one step per worker), for at most task.max_iters iterations."""
    prob = Problem(task, seed, n_workers)
    runner = {SyncMode.BSP: _run_ssp, SyncMode.SSP: _run_ssp, SyncMode.ASP: _run_asp,
              SyncMode.LOCAL_SGD: _run_local_sgd}[sync.mode]
    return itertools.islice(runner(prob, codec, sync, seed), task.max_iters)


def reference_loss(task: TaskSpec, n_workers: int, seed: int) -> float:
    """The target of a seed: the eval loss uncompressed BSP has after task.target_iters iterations."""
    trace = list(itertools.islice(losses(task, CodecSetting(), SyncSetting(), n_workers, seed), task.target_iters))
    return trace[-1]


def iterations_to_target(task: TaskSpec, codec: CodecSetting, sync: SyncSetting, n_workers: int, seed: int,
                         target: float) -> int | None:
    """Iterations until the eval loss first reaches `target`; None if not within task.max_iters."""
    for it, loss in enumerate(losses(task, codec, sync, n_workers, seed)):
        if loss <= target:
            return it + 1
    return None


def _exchange(codecs: list[GradCodec], grads: torch.Tensor, shapes: Sequence[tuple[int, ...]]) -> torch.Tensor:
    n = len(codecs)
    return run_lockstep([c.exchange(grads[i], shapes, i, n) for i, c in enumerate(codecs)])[0]


def _run_ssp(prob: Problem, codec: CodecSetting, sync: SyncSetting, seed: int) -> Iterator[float]:
    """BSP, or SSP with bound s: worker w's gradient at step t is taken at the parameters of step t - d,
    d drawn uniformly from 0..s (seeded); the N compressed gradients are averaged and applied together."""
    task, n = prob.task, prob.n_workers
    s = sync.staleness if sync.mode is SyncMode.SSP else 0
    codecs = [codec.make(seed) for _ in range(n)]
    delays = torch.Generator().manual_seed(3000 + seed)
    history = [prob.theta0.clone()]
    for it in itertools.count():
        d = torch.randint(0, s + 1, (n,), generator=delays) if s else torch.zeros(n, dtype=torch.long)
        theta_w = torch.stack([history[max(0, len(history) - 1 - int(k))] for k in d])
        g = _exchange(codecs, worker_grads(theta_w, *prob.batch(it), task), task.shapes)
        history.append(history[-1] - task.lr * g)
        del history[:-(s + 1)]
        yield prob.eval_loss(history[-1])


def _run_asp(prob: Problem, codec: CodecSetting, sync: SyncSetting, seed: int) -> Iterator[float]:
    """Round-robin asynchronous parameter server: worker w pushes at update u = rN + w a gradient taken at
    the parameters it pulled after its previous push (u - N + 1: N - 1 updates stale); each push is
    compressed by the worker's own codec (a group of 1 with the server) and applied with lr / N.
    One iteration = N updates (every worker one step)."""
    task, n = prob.task, prob.n_workers
    codecs = [codec.make(seed + 7919 * w) for w in range(n)]
    hist = {0: prob.theta0.clone()}  # parameters after each server update, the last N kept
    for it in itertools.count():
        base = it * n
        theta_w = torch.stack([hist[max(0, base + w - n + 1)] for w in range(n)])
        grads = worker_grads(theta_w, *prob.batch(it), task)
        for w in range(n):
            g = run_lockstep([codecs[w].exchange(grads[w], task.shapes, 0, 1)])[0]
            hist[base + w + 1] = hist[base + w] - task.lr / n * g
        for u in [u for u in hist if u <= base]:
            del hist[u]
        yield prob.eval_loss(hist[base + n])


def _run_local_sgd(prob: Problem, codec: CodecSetting, sync: SyncSetting, seed: int) -> Iterator[float]:
    """Local SGD: every worker steps on its own shard; every H steps the model deltas since the last
    average go through the codec and the averaged delta is applied to everyone (H = 1 is BSP).
    The eval loss is that of the workers' mean parameters."""
    task, n, h = prob.task, prob.n_workers, max(1, sync.local_steps)
    codecs = [codec.make(seed) for _ in range(n)]
    anchor = prob.theta0.clone()
    theta = anchor.expand(n, -1).clone()
    for it in itertools.count():
        theta -= task.lr * worker_grads(theta, *prob.batch(it), task)
        if (it + 1) % h == 0:
            anchor = anchor + _exchange(codecs, theta - anchor, task.shapes)
            theta = anchor.expand(n, -1).clone()
        yield prob.eval_loss(theta.mean(0))


# -- factors ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FactorRow:
    """One codec x sync cell: iterations per seed (None = not reached), factors vs uncompressed BSP."""

    codec: str
    sync: str
    iterations: tuple[int | None, ...]
    factors: tuple[float, ...]  # inf where the target was not reached

    @property
    def mean(self) -> float:
        return statistics.fmean(self.factors)

    @property
    def std(self) -> float:
        return statistics.stdev(self.factors) if len(self.factors) > 1 and math.isfinite(self.mean) else 0.0

    def to_dict(self) -> dict[str, Any]:
        fin = lambda v: v if math.isfinite(v) else None  # noqa: E731  JSON has no inf
        return {"codec": self.codec, "sync": self.sync, "iterations": list(self.iterations),
                "factors": [fin(f) for f in self.factors], "mean": fin(self.mean), "std": fin(self.std),
                "min": fin(min(self.factors)), "max": fin(max(self.factors))}


def measure(codecs: Sequence[CodecSetting] = DEFAULT_CODECS, syncs: Sequence[SyncSetting] = DEFAULT_SYNCS,
            n_workers: int = 8, seeds: Sequence[int] = (0, 1, 2), task: TaskSpec = TaskSpec(),
            progress: Any = None) -> list[FactorRow]:
    """Every codec x sync cell over `seeds`; factor = iterations / iterations of uncompressed BSP, same seed."""
    targets = {s: reference_loss(task, n_workers, s) for s in seeds}
    base = {s: iterations_to_target(task, CodecSetting(), SyncSetting(), n_workers, s, targets[s]) for s in seeds}
    rows = []
    for codec in codecs:
        for sync in syncs:
            its = tuple(base[s] if codec == CodecSetting() and sync == SyncSetting()
                        else iterations_to_target(task, codec, sync, n_workers, s, targets[s]) for s in seeds)
            rows.append(FactorRow(codec.label, sync.label, its,
                                  tuple(math.inf if i is None else i / base[s] for i, s in zip(its, seeds))))  # type: ignore[operator]
            if progress:
                progress(rows[-1])
    return rows


def format_table(rows: Sequence[FactorRow]) -> str:
    """Codecs down, sync modes across; each cell 'mean +-std' (or 'n/r' when a seed never reached it)."""
    syncs = list(dict.fromkeys(r.sync for r in rows))
    codecs = list(dict.fromkeys(r.codec for r in rows))
    cell = {(r.codec, r.sync): ("n/r" if not math.isfinite(r.mean) else f"{r.mean:.2f} +-{r.std:.2f}") for r in rows}
    w0 = max(len(c) for c in [*codecs, "codec"])
    ws = [max(len(s), 11) for s in syncs]
    lines = ["codec".ljust(w0) + "".join(f"  {s:>{w}}" for s, w in zip(syncs, ws))]
    for c in codecs:
        lines.append(c.ljust(w0) + "".join(f"  {cell.get((c, s), '-'):>{w}}" for s, w in zip(syncs, ws)))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simdist.validation.convergence", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--seeds", type=int, default=3, help="seeds 0 .. n-1")
    ap.add_argument("--json", action="store_true", help="print the result as JSON instead of the table")
    ap.add_argument("--out", help="also write the JSON result to this file")
    ap.add_argument("--target-iters", type=int, default=TaskSpec.target_iters,
                    help="the target loss is uncompressed BSP's after this many iterations")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    task = TaskSpec(target_iters=args.target_iters)
    seeds = tuple(range(args.seeds))
    rows = measure(n_workers=args.workers, seeds=seeds, task=task,
                   progress=None if args.json else lambda r: print(f"  {r.codec:<18} {r.sync:<16} {r.iterations}",
                                                                   file=sys.stderr, flush=True))
    result = {"task": asdict(task), "params": task.params, "workers": args.workers, "seeds": list(seeds),
              "torch_version": torch.__version__, "rows": [r.to_dict() for r in rows]}
    if args.out:
        tmp = f"{args.out}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(result, f, indent=1)
        os.replace(tmp, args.out)
    print(json.dumps(result, indent=1) if args.json else format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
