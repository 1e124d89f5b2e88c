"""CPU work of collectives that run in host memory: sums charged after each reducing step, and gloo's TCP
transport on a rank that has one core.

Collective schedules carry `Step.reduce_bytes` (what each receiver sums per repetition); GPU kernels sum at
HBM speed, which network models leave out. A CPU-side all-reduce does not: gloo's algorithms (and Horovod's
MPI path without CUDA-aware MPI) stage GPU buffers into host memory and sum them there with the CPU, and a
CPU parameter server (communication.ps.server: cpu) sums every worker's shard before its update. Each
summed byte reads two operands and writes one (3 bytes of memory traffic), after the step's transfers
(`delay_s`, which both network models charge): the sum needs the whole chunk, and the next send needs the sum
(gloo/allreduce.cc ring, gloo/allreduce_ring_chunked.h: waitRecv, then fn_->call, then the next send).

Who sums, at what rate (`gloo_host`):
- a rank whose device is a CPU (`vendor: cpu`: the device is the core the process runs on) sums at that
  device's declared memory bandwidth;
- GPU ranks (gloo staging through host memory) sum on one host thread each (gloo runs its algorithm on the
  calling thread) at one core's measured rate, `HOST_THREAD_SUM_Bps`.

gloo's TCP transport (gloo/transport/tcp) runs one epoll loop thread per device (device.cc, loop.cc) that
receives: `Pair::handleEvents` -> `Pair::read` -> recv() copies socket buffer -> user buffer; the calling thread
sends in place: `Pair::send` -> `sendAsyncMode` -> writev() copies user buffer -> socket buffer (the loop
thread finishes what the socket buffer did not take). On a rank with more than one core the two threads copy
on their own cores, one TCP stream each way (the link's per-stream cap, LinkSpec.stream_cap_Bps). On a rank
pinned to ONE core (a `vendor: cpu` device, e.g. `taskset -c 0`), both threads and the sums share that core:
every byte the rank sends and receives is copied by the same core, which is the network models' one-thread
socket rule (`Step.shared_thread`: a transfer gets the stream cap over the most stream-capped transfers either
of its ranks has in the step), and the sum follows the transfer on that core. The copies stream with the NIC's
DMA (the kernel sends as writev fills the socket buffer), so they bound the transfer's rate rather than add to
its time.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from simdist.collectives.schedule import Schedule, Step
from simdist.hardware.specs import HOST_CPU_SERVER, ClusterSpec

if TYPE_CHECKING:
    from simdist.scenario import Scenario

BYTES_PER_SUMMED_BYTE = 3  # read a, read b, write a + b


# One host thread's sum a + b -> c in bytes of memory traffic per second: benchmarks/host_copy_cpu.py --repeats 7
# (numpy 2.4, 64 MiB fp32 buffers, one pinned core, median of 7) on the development machine, 2026-12-07:
# /proc/cpuinfo 'Intel(R) Xeon(R) Processor' (KVM-masked SKU, AVX-512, 2 vCPUs), under other load. Three runs of
# the benchmark gave medians of 13.2-15.0 GB/s (13.2 with 512 MiB buffers, beyond the cache); the first run's
# median is used, not the best.
HOST_THREAD_SUM_Bps = 14.7e9


@dataclass(frozen=True)
class GlooHost:
    """The host CPU side of gloo on a cluster: the slowest rank's summing rate (memory traffic per second)
    and whether some rank has a single core that its transport threads and sums share."""

    sum_Bps: float
    one_core: bool


def gloo_host(cluster: ClusterSpec) -> GlooHost:
    """Where gloo's sums and socket copies run on `cluster`: a CPU device's own memory bandwidth and its one core,
    or one host thread of a GPU node at the measured core rate. A ring's step waits for its slowest rank, so
    the slowest node group sets the rate."""
    devices = [g.gpu for g in cluster.node_groups]
    rates = [d.memory_bandwidth_Bps if d.is_cpu else HOST_THREAD_SUM_Bps for d in devices]
    return GlooHost(min(rates), any(d.is_cpu for d in devices))


def host_reduce_s(reduce_bytes: float, bandwidth_Bps: float) -> float:
    """Seconds to sum `reduce_bytes` into a host buffer at `bandwidth_Bps` of memory traffic."""
    return BYTES_PER_SUMMED_BYTE * reduce_bytes / bandwidth_Bps


def _step(step: Step, bandwidth_Bps: float, receivers: frozenset[int] | None) -> Step:
    # with `receivers`, only steps whose every transfer goes to (or, a pipelined PS step's pulls, comes from)
    # them reduce there
    if step.reduce_bytes <= 0 or (receivers is not None and
                                  any(t.dst not in receivers and t.src not in receivers for t in step.transfers)):
        return step
    return replace(step, delay_s=step.delay_s + step.repeat * host_reduce_s(step.reduce_bytes, bandwidth_Bps))


def with_host_reduction(schedule: Schedule, bandwidth_Bps: float,
                        receivers: "frozenset[int] | None" = None) -> Schedule:
    """`schedule` with every reducing step (only those whose transfers all go to `receivers`, e.g. CPU
    parameter servers, when given) followed by its host-memory summation time."""
    chains = tuple(tuple(_step(s, bandwidth_Bps, receivers) for s in chain) for chain in schedule.chains)
    return replace(schedule, chains=chains)


def host_reduced(schedule: Schedule, scenario: "Scenario", strategy: str, servers: "tuple[int, ...]" = ()) -> Schedule:
    """The schedule with the CPU work of host-memory collectives charged: every reduction of gloo's CPU-side
    algorithms (not PS, which sums on its servers) at the rate `gloo_host` finds, its socket copies on one
    thread per rank where a rank has one core, and the servers' sums of a CPU parameter server. `strategy`
    is the one the schedule runs (a codec's all_gather may run as a ring under another strategy)."""
    comm = scenario.communication
    if strategy == "ps":
        if comm.ps_server.value == "cpu":
            return with_host_reduction(schedule, HOST_CPU_SERVER.memory_bandwidth_Bps, frozenset(servers))
        return schedule
    if comm.backend.value == "gloo":
        gloo = gloo_host(scenario.cluster)
        summed = with_host_reduction(schedule, gloo.sum_Bps)
        return summed.with_streams(1, shared_thread=True) if gloo.one_core else summed
    return schedule
