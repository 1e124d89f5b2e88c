"""simdist.validation.hooks: codecs in one process (lock-step) and for real under gloo + DDP on 3 local processes."""
from __future__ import annotations

import math
import multiprocessing as mp
import pickle
import socket
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from simdist.compression import make_codec
from simdist.errors import ScenarioError
from simdist.scenario import CompressionMethod, CompressionSpec
from simdist.validation.hooks import (Exchange, Op, codec_for, hook_for, pack_signs, payload_bytes, run_distributed,
                              run_lockstep, unpack_signs)

torch.set_num_threads(1)
SHAPES = [(24, 20), (24,), (7, 24), (7,)]
NUMEL = sum(math.prod(s) for s in SHAPES)
WORLD = 3
METHODS: list[tuple[str, dict[str, Any]]] = [
    ("none", {}), ("fp16", {}), ("bf16", {}), ("int8", {}), ("onebit", {}),
    ("topk", {"ratio": 0.05}), ("randomk", {"ratio": 0.1}), ("powersgd", {"rank": 2}),
]


def _grads(world: int, step: int) -> torch.Tensor:
    return torch.randn(world, NUMEL, generator=torch.Generator().manual_seed(100 + step))


def _lockstep(method: str, params: dict[str, Any], world: int, steps: int) -> tuple[list[torch.Tensor], list[int]]:
    """Worker 0's output per step and the payload bytes of worker 0's collectives at the last step."""
    codecs = [codec_for(method, seed=7, **params) for _ in range(world)]
    outs, wire = [], []
    for step in range(steps):
        g = _grads(world, step)
        gens = [c.exchange(g[i], SHAPES, i, world) for i, c in enumerate(codecs)]
        first = gens[0]

        def logged(gen: Any = first) -> Any:  # record worker 0's payloads
            wire.clear()
            ex = next(gen)
            while True:
                wire.append(payload_bytes(ex))
                try:
                    ex = gen.send((yield ex))
                except StopIteration as stop:
                    return stop.value

        res = run_lockstep([logged(), *gens[1:]])
        assert all(torch.equal(res[0], r) for r in res[1:]), method
        outs.append(res[0])
    return outs, list(wire)


def test_pack_unpack_roundtrip() -> None:
    x = torch.tensor([0.5, -1.0, 0.0, -0.0, 3.0, -2.0, 1e-9, -1e-9])
    assert torch.equal(unpack_signs(pack_signs(x)), torch.tensor([1., -1, 1, 1, 1, -1, 1, -1]))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-10, 10, allow_nan=False), min_size=1, max_size=6).map(lambda v: v * 8))
def test_sign_bits_roundtrip_property(vals: list[float]) -> None:
    x = torch.tensor(vals[: len(vals) // 8 * 8])
    assert torch.equal(unpack_signs(pack_signs(x)), torch.where(x >= 0, 1.0, -1.0))
    assert pack_signs(x).numel() == x.numel() // 8


@pytest.mark.parametrize("method,params", METHODS)
def test_lockstep_wire_bytes_match_simdist_codec(method: str, params: dict[str, Any]) -> None:
    _, wire = _lockstep(method, params, WORLD, steps=3)
    spec = CompressionSpec(CompressionMethod(method), params.get("ratio"), params.get("rank"))
    assert sum(wire) == make_codec(spec).wire_bytes(SHAPES, 4, WORLD)


def test_dense_methods_are_close_to_the_true_average() -> None:
    true = _grads(WORLD, 0).mean(0)
    for method, rtol in (("none", 1e-6), ("fp16", 2e-3), ("bf16", 1.6e-2)):
        out = _lockstep(method, {}, WORLD, 1)[0][0]
        assert torch.allclose(out, true, rtol=rtol, atol=rtol * true.abs().max().item()), method


def test_int8_error_within_one_level_and_unbiased_over_steps() -> None:
    g = _grads(WORLD, 0)
    outs, _ = _lockstep("int8", {}, WORLD, 1)
    levels = 127 // WORLD
    start = 0
    for shape in SHAPES:
        n = math.prod(shape)
        seg = slice(start, start + n)
        scale = g[:, seg].abs().max()
        assert (outs[0][seg] - g[:, seg].mean(0)).abs().max() <= scale / levels + 1e-6
        start += n


@pytest.mark.parametrize("method,params", [("topk", {"ratio": 0.05}), ("onebit", {}), ("randomk", {"ratio": 0.1}),
                                           ("powersgd", {"rank": 1})])
def test_error_feedback_makes_the_running_mean_converge(method: str, params: dict[str, Any]) -> None:
    """Same gradient every step: with error feedback the sum of outputs tracks the sum of true averages."""
    codecs = [codec_for(method, seed=3, **params) for _ in range(WORLD)]
    g = _grads(WORLD, 0)
    true = g.mean(0)
    acc = torch.zeros(NUMEL)
    errs = []
    for step in range(60):
        acc += run_lockstep([c.exchange(g[i], SHAPES, i, WORLD) for i, c in enumerate(codecs)])[0]
        errs.append(float((acc / (step + 1) - true).norm() / true.norm()))
    assert errs[-1] < 0.4 * max(errs) and errs[-1] < errs[30], errs[::10]
    if method in ("topk", "randomk"):  # nothing is lost: sent + kept residuals = every gradient
        residual = torch.stack([c.residual[0] for c in codecs]).mean(0)  # type: ignore[attr-defined]
        assert torch.allclose(acc + residual, 60 * true, rtol=1e-4, atol=1e-4)


def test_topk_without_error_feedback_keeps_exactly_the_largest_entries() -> None:
    g = _grads(1, 0)[0]
    out = run_lockstep([codec_for("topk", ratio=0.05, error_feedback=False).exchange(g, SHAPES, 0, 1)])[0]
    k = math.ceil(0.05 * NUMEL)
    assert int((out != 0).sum()) == k
    assert torch.equal(out.abs().topk(k).values.sort().values, g.abs().topk(k).values.sort().values)


def test_codec_for_rejects_bad_parameters() -> None:
    with pytest.raises(ScenarioError):
        codec_for("topk")  # ratio missing
    with pytest.raises(ScenarioError):
        codec_for("nope")
    with pytest.raises(ScenarioError):
        codec_for("fp16", ratio=0.1)


# -- real processes ------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, q: Any) -> None:
    import torch.distributed as dist
    from torch import nn

    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        wire: list[int] | None = None
        originals = {name: getattr(dist, name) for name in ("all_reduce", "all_gather", "all_to_all_single")}

        def counting(name: str) -> Any:
            def f(*a: Any, **kw: Any) -> Any:
                if wire is not None:
                    t = a[0] if name == "all_reduce" else a[1]
                    wire.append(t.numel() * t.element_size())
                return originals[name](*a, **kw)
            return f

        for name in originals:
            setattr(dist, name, counting(name))
        out: dict[str, Any] = {"direct": {}, "ddp": {}}
        for method, params in METHODS:  # the exchange alone, rank-specific inputs
            codec = codec_for(method, seed=7, **params)
            out["direct"][method] = [run_distributed(codec.exchange(_grads(world, s)[rank], SHAPES, rank, world))
                                     for s in range(3)]
        for method, params in METHODS:  # inside DDP: capture each bucket's input and output
            torch.manual_seed(0)
            model = nn.Sequential(nn.Linear(20, 24), nn.ReLU(), nn.Linear(24, 7))
            ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1)
            state, hook = hook_for(method, seed=7, **dict(params))
            log: list[tuple[torch.Tensor, list[tuple[int, ...]], torch.Tensor]] = []

            def capturing(st_, bucket, hook=hook, log=log):  # type: ignore[no-untyped-def]  # DDP checks annotations
                inp, shapes = bucket.buffer().clone(), [tuple(g.shape) for g in bucket.gradients()]
                return hook(st_, bucket).then(lambda f: (log.append((inp, shapes, f.value().clone())), f.value())[1])

            ddp.register_comm_hook(state, capturing)
            opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
            steps = []
            for s in range(4):
                x = torch.randn(8, 20, generator=torch.Generator().manual_seed(10 * s + rank))
                wire = []
                opt.zero_grad()
                ddp(x).pow(2).mean().backward()
                steps.append(sum(wire))
                wire = None
                opt.step()
            out["ddp"][method] = {"log": log, "wire": steps}
        q.put((rank, pickle.dumps(out)))  # plain pickle: no shared-memory fds
        dist.destroy_process_group()
    except BaseException as e:  # report, never hang the parent
        q.put((rank, repr(e)))


@pytest.fixture(scope="module")
def distributed() -> dict[int, Any]:
    import torch._dynamo  # noqa: F401  DDP imports it on construction: ~3 s per child unless done before fork

    ctx = mp.get_context("fork")
    q = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, WORLD, port, q)) for r in range(WORLD)]
    for p in procs:
        p.start()
    res = dict(q.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=30)
    bad = {r: v for r, v in res.items() if isinstance(v, str)}
    assert not bad, bad
    return {r: pickle.loads(v) for r, v in res.items()}


@pytest.mark.parametrize("method,params", METHODS)
def test_real_exchange_equals_the_lockstep_simulation(distributed: dict[int, Any], method: str,
                                                      params: dict[str, Any]) -> None:
    codecs = [codec_for(method, seed=7, **params) for _ in range(WORLD)]
    for s in range(3):
        sim = run_lockstep([c.exchange(_grads(WORLD, s)[i], SHAPES, i, WORLD) for i, c in enumerate(codecs)])
        for r in range(WORLD):
            tol = {"fp16": 2e-3, "bf16": 1.6e-2}.get(method, 1e-5)  # gloo's summation order differs from ours
            assert torch.allclose(distributed[r]["direct"][method][s], sim[r], rtol=tol, atol=tol), (method, s, r)


@pytest.mark.parametrize("method,params", METHODS)
def test_ddp_hook_averages_like_the_lockstep_codec_and_sends_simdist_bytes(
        distributed: dict[int, Any], method: str, params: dict[str, Any]) -> None:
    """torch's own hooks (fp16, bf16, PowerSGD) and ours: DDP's result equals the lock-step replay of the
    codec on the captured per-rank buckets, and the bytes each rank sends equal simdist's wire_bytes."""
    logs = [distributed[r]["ddp"][method]["log"] for r in range(WORLD)]
    assert len(logs[0]) == 4  # one bucket per step
    codecs = [codec_for(method, seed=7, **params) for _ in range(WORLD)]
    for s in range(4):
        shapes = logs[0][s][1]
        sim = run_lockstep([c.exchange(logs[i][s][0], shapes, i, WORLD) for i, c in enumerate(codecs)])
        for r in range(WORLD):
            tol = {"fp16": 2e-3, "bf16": 1.6e-2}.get(method, 1e-4)
            assert torch.allclose(logs[r][s][2], sim[r], rtol=tol, atol=tol * 1e-2), (method, s, r)
        true = torch.stack([logs[i][s][0] for i in range(WORLD)]).mean(0)
        if method in ("none", "fp16"):
            assert torch.allclose(logs[0][s][2], true, rtol=2e-3, atol=2e-3 * true.abs().max().item())
    spec = CompressionSpec(CompressionMethod(method), params.get("ratio"), params.get("rank"))
    expected = make_codec(spec).wire_bytes(logs[0][0][1], 4, WORLD)
    wire = distributed[0]["ddp"][method]["wire"]
    assert wire[-1] == expected, (wire, expected)
    if method == "powersgd":  # torch's PowerSGD runs dense for start_powerSGD_iter = 2 steps
        assert wire[0] == NUMEL * 4 and wire[2] == expected


def test_lockstep_rejects_workers_that_disagree() -> None:
    def gen(op: Op) -> Any:
        yield Exchange(op, torch.zeros(2))
        return torch.zeros(2)

    with pytest.raises(AssertionError):
        run_lockstep([gen(Op.SUM), gen(Op.MAX)])
