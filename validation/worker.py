"""One rank of a validation launch: reads RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (torchrun style),
runs the given cases and, on rank 0, writes one JSON with every timing and the environment.

    python -m simdist.validation.worker --cases cases.json --out result.json [--meta '{"launcher": ...}']

gloo on CPU, nccl when CUDA is present (one GPU per LOCAL_RANK). `torch.set_num_threads(1)`.
"""
from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import sys
import time


def _write_atomic(path: str, data: dict[str, object]) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


def _load_cases(text: str) -> list[object]:
    from simdist.validation.cases import case_from_dict

    raw = json.loads(open(text).read() if os.path.exists(text) else text)
    return [case_from_dict(d, path=f"cases[{i}]") for i, d in enumerate(raw)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simdist.validation.worker", description=__doc__)
    ap.add_argument("--cases", required=True, help="JSON list of case dicts, or a path to one")
    ap.add_argument("--out", required=True, help="where rank 0 writes the result JSON")
    ap.add_argument("--meta", default="{}", help="JSON object copied into 'environment' (rates, hosts...)")
    ap.add_argument("--timeout-s", type=float, default=float(os.environ.get("SDT_TIMEOUT_S", "600")))
    args = ap.parse_args(argv)
    cases = _load_cases(args.cases)

    t_start = time.perf_counter()
    import torch
    import torch.distributed as dist

    from simdist.validation.cases import CaseKind

    torch.set_num_threads(1)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        backend, device = "nccl", f"cuda:{local_rank}"
        torch.cuda.set_device(local_rank)
        sync = torch.cuda.synchronize
    else:
        backend, device = "gloo", "cpu"
        sync = lambda: None  # noqa: E731
    t_import = time.perf_counter() - t_start
    dist.init_process_group(backend, init_method="env://", timeout=datetime.timedelta(seconds=args.timeout_s))
    t_init = time.perf_counter() - t_start - t_import
    rank, world = dist.get_rank(), dist.get_world_size()

    # Cyclic garbage is collected between cases on this thread only: a collection triggered on a gloo
    # thread (which runs the DDP hooks' future callbacks) could free a process group there, and a
    # ProcessGroupGloo freed on its own thread joins itself and aborts ("Resource deadlock avoided").
    gc.disable()
    results = []
    for case in cases:
        gc.collect()
        if case.kind is CaseKind.DDP:
            from simdist.validation.ddp_case import run_ddp_case
            res = run_ddp_case(case, device, sync)
        elif case.kind is CaseKind.CODEC:
            from simdist.validation.ddp_case import run_codec_case
            res = run_codec_case(case, device, sync)
        elif case.kind is CaseKind.P2P:
            from simdist.validation.p2p_case import run_p2p_case
            res = run_p2p_case(case, device, sync)
        else:
            from simdist.validation.comm_cases import run_comm_case
            res = run_comm_case(case, device, sync)
        results.append(res)
        if rank == 0:
            for p in res["points"]:
                print(f"[validation] {res['label']:<16} {p['size_bytes'] / 1e6:9.2f} MB  median {p['median_s'] * 1e3:9.2f} ms"
                      f"  (min {p['min_s'] * 1e3:.2f}, max {p['max_s'] * 1e3:.2f})", file=sys.stderr, flush=True)
    dist.barrier()
    if rank == 0:
        env = {
            "world_size": world, "backend": backend, "torch_version": torch.__version__,
            "python": platform.python_version(), "hostname": platform.node(),
            "master_addr": os.environ.get("MASTER_ADDR"), "local_world_size": os.environ.get("LOCAL_WORLD_SIZE"),
            "import_s": t_import, "init_process_group_s": t_init,
            "cuda_device": torch.cuda.get_device_name(local_rank) if backend == "nccl" else None,
            **json.loads(args.meta),
        }
        _write_atomic(args.out, {"environment": env, "cases": results})
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    # Leave without running C++ static destructors: everything is measured, written and torn down by now, and
    # gloo's threads, destroyed at interpreter exit on a busy machine, have aborted a finished rank with
    # "terminate called without an active exception", failing a launch whose results were complete.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
