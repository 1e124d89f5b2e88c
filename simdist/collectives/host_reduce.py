"""Reductions that run on a CPU in host memory, charged as time after each reducing step.

Collective schedules carry `Step.reduce_bytes` (what each receiver sums per repetition); GPU kernels sum
at HBM speed, which network models leave out. A CPU-side all-reduce does not: gloo's algorithms (and
Horovod's MPI path without CUDA-aware MPI) stage GPU buffers into host memory and sum them there with
the CPU, and a CPU parameter server (communication.ps.server: cpu) sums every worker's shard before
its update. Each summed byte reads two operands and writes one (3 bytes of host memory traffic), at
`bandwidth_Bps`, after the step's transfers (`delay_s`, which both network models charge).
"""
from __future__ import annotations

from dataclasses import replace

from simdist.collectives.schedule import Schedule, Step
from simdist.hardware.specs import HOST_CPU_SERVER

# One reducing thread (gloo's ring, an MPI rank) streams about 10 GB/s of host memory traffic on a
# current server core (AVX2 adds run at memory speed; a single core reaches roughly a tenth of a
# socket's DDR bandwidth). Estimate, UNCERTAIN: calibrate.
HOST_REDUCE_THREAD_Bps = 10e9
BYTES_PER_SUMMED_BYTE = 3  # read a, read b, write a + b


def host_reduce_s(reduce_bytes: float, bandwidth_Bps: float = HOST_REDUCE_THREAD_Bps) -> float:
    """Seconds to sum `reduce_bytes` into a host buffer at `bandwidth_Bps` of memory traffic."""
    return BYTES_PER_SUMMED_BYTE * reduce_bytes / bandwidth_Bps


def _step(step: Step, bandwidth_Bps: float, receivers: frozenset[int] | None) -> Step:
    # with `receivers`, only steps whose every transfer goes to (or, a pipelined PS step's pulls, comes from)
    # them reduce there
    if step.reduce_bytes <= 0 or (receivers is not None and
                                  any(t.dst not in receivers and t.src not in receivers for t in step.transfers)):
        return step
    return replace(step, delay_s=step.delay_s + step.repeat * host_reduce_s(step.reduce_bytes, bandwidth_Bps))


def with_host_reduction(schedule: Schedule, bandwidth_Bps: float = HOST_REDUCE_THREAD_Bps,
                        receivers: "frozenset[int] | None" = None) -> Schedule:
    """`schedule` with every reducing step (only those whose transfers all go to `receivers`, e.g. CPU
    parameter servers, when given) followed by its host-memory summation time."""
    chains = tuple(tuple(_step(s, bandwidth_Bps, receivers) for s in chain) for chain in schedule.chains)
    return replace(schedule, chains=chains)


def host_reduced(schedule: Schedule, backend: str, strategy: str, ps_server: str,
                 servers: "tuple[int, ...]" = ()) -> Schedule:
    """The schedule with the reductions that run on CPUs charged: every reduction of gloo's CPU-side
    algorithms (not PS, which sums on its servers), and the servers' sums of a CPU parameter server."""
    if strategy == "ps":
        if ps_server == "cpu":
            return with_host_reduction(schedule, HOST_CPU_SERVER.memory_bandwidth_Bps, frozenset(servers))
        return schedule
    if backend == "gloo":
        return with_host_reduction(schedule, HOST_REDUCE_THREAD_Bps)
    return schedule
