"""Parameter-server all-reduce: the tensor is sharded evenly over the servers; workers push their
gradients' shards to the servers, each server updates its shard, workers pull it back.

Servers are endpoint ids: one inside the group is colocated with that worker (its own shard never
touches the wire); one outside the group is a dedicated server host (ids after the GPUs).

Two ways of running the workers (`communication.ps.aggregation`):
- `gpu` (per-GPU workers): every GPU pushes its whole gradient. One chain per server, so servers run
  independently: push (lockstep=False, then the server's `delay_s`), then pull (lockstep=False), or,
  with `communication.ps.partition`, in pipelined partitions (pipelined_push_pull, as BytePS runs it).
- `node` (local aggregation, as TensorFlow's replicated strategies, MXNet KVStore device+dist and
  BytePS run it): the GPUs of each node first reduce-scatter the gradient among themselves (the
  node's interior, `intra` algorithm), so each GPU holds 1/g of the node's sum; each GPU pushes its
  slice's part of every server's shard, so one gradient's worth (S) crosses each node's NICs per
  direction instead of g x S; after the pull the node all-gathers. Push and pull are one step each
  (or pipelined partitions, as above) over all servers (a server's update waits for its last push; shards are balanced, so this is the
  per-server chain's time), between the two intra-node phases in one chain.
"""
from __future__ import annotations

import math
from enum import StrEnum
from typing import Sequence

from simdist.collectives._steps import merge_parallel
from simdist.collectives.flat import flat_chain
import numpy as np

from simdist.collectives.schedule import CollectiveOp, Group, Step, Transfer, TransferArray


class PsAggregation(StrEnum):
    """communication.ps.aggregation: who pushes to the servers."""

    GPU = "gpu"  # every GPU is a worker (per-GPU push and pull)
    NODE = "node"  # gradients are reduced inside each node first: one gradient's worth per node


class PsServer(StrEnum):
    """communication.ps.server: what a server's update runs on."""

    GPU = "gpu"  # on a GPU of the cluster's first kind (HBM bandwidth)
    CPU = "cpu"  # in host memory on the CPU (TensorFlow PS tasks, MXNet and BytePS servers): HOST_CPU_SERVER


def _check(servers: tuple[int, ...], delay_s: float) -> None:
    if not servers:
        raise ValueError("ps needs at least one server endpoint (servers=(...))")
    if len(set(servers)) != len(servers):
        raise ValueError(f"ps servers must be distinct, got {servers}")
    if any(int(s) != s or s < 0 for s in servers):
        raise ValueError(f"ps servers must be non-negative endpoint ids, got {servers}")
    if delay_s < 0:
        raise ValueError(f"server_delay_s must be >= 0, got {delay_s}")


# PS frameworks push and pull per key or partition, not per bucket: BytePS splits tensors into partitions of
# BYTEPS_PARTITION_BYTES (4,096,000 B by default) and pipelines push and pull across them; MXNet's KVStore
# slices arrays above MXNET_KVSTORE_BIGARRAY_BOUND (1,000,000 elements, 4 MB of fp32) over the servers and
# pushes/pulls each key independently; TensorFlow's PS pulls a variable as soon as its update is done.
# So a worker pulls partition k while it pushes partition k+1 (a NIC is full duplex). simdist pipelines
# only when asked (communication.ps.partition, e.g. this figure for BytePS): the asynchronous PS
# strategies (training.sync asp/ssp) exchange whole shards, and a bsp run must equal ssp with bound 0.
PS_PARTITION_BYTES = 4_096_000.0


def _partitions(part_bytes: float, partition_bytes: float | None) -> int:
    if partition_bytes is None:
        return 1
    if partition_bytes <= 0:
        raise ValueError(f"partition_bytes must be > 0, got {partition_bytes}")
    return max(1, math.ceil(part_bytes / partition_bytes - 1e-9))


def _pieces(transfers, k: float):
    """Every transfer's size divided by `k` (an array stays an array)."""
    if isinstance(transfers, TransferArray):
        return TransferArray(transfers.src, transfers.dst, transfers.size_bytes / k)
    return tuple(Transfer(t.src, t.dst, t.size_bytes / k) for t in transfers)


def _array(src, dst, size: float) -> TransferArray:
    """Transfers src[i] -> dst[i] of `size` bytes each, as arrays (one object, not one per worker)."""
    return TransferArray(np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64), float(size))


def pipelined_push_pull(push: tuple[Transfer, ...], pull: tuple[Transfer, ...], partitions: int,
                        delay_s: float, reduce_bytes: float, what: str) -> tuple[Step, ...]:
    """Push then pull of `push`/`pull` (whole sizes), cut into `partitions` pieces pipelined one deep: push
    piece 1; then (partitions - 1) times push piece k+1 while pulling piece k; then pull the last. One piece
    gives (push, pull) as two steps. The servers' update time `delay_s` is charged in full, spread per piece."""
    if partitions <= 1:
        return (Step(push, lockstep=False, delay_s=delay_s, reduce_bytes=reduce_bytes, label=f"push {what}"),
                Step(pull, lockstep=False, label=f"pull {what}"))
    k = float(partitions)
    piece_push, piece_pull = _pieces(push, k), _pieces(pull, k)
    return (
        Step(piece_push, lockstep=False, delay_s=delay_s / k, reduce_bytes=reduce_bytes / k,
             label=f"push {what}, partition 1 of {partitions}"),
        Step(piece_push + piece_pull, lockstep=False, repeat=partitions - 1, delay_s=delay_s * (k - 1) / k,
             reduce_bytes=reduce_bytes / k, label=f"push partition k+1 while pulling k ({what})"),
        Step(piece_pull, lockstep=False, label=f"pull {what}, partition {partitions} of {partitions}"),
    )


def ps_chains(
    size_bytes: float, group: Group, servers: Sequence[int], delay_s: float = 0.0,
    partition_bytes: float | None = None,
) -> tuple[tuple[Step, ...], ...]:
    """One push/pull chain per server for an all-reduce of `size_bytes` per worker (per-GPU workers); with
    `partition_bytes`, a larger shard is pushed and pulled in pipelined partitions (pipelined_push_pull)."""
    servers = tuple(servers)
    _check(servers, delay_s)
    shard = size_bytes / len(servers)
    parts = _partitions(shard, partition_bytes)
    ranks = np.asarray(group.ranks, dtype=np.int64)
    chains = []
    for sv in servers:
        workers = ranks[ranks != sv]
        steps: tuple[Step, ...] = ()
        if workers.size:
            server = np.full(workers.size, sv, dtype=np.int64)
            steps = pipelined_push_pull(_array(workers, server, shard), _array(server, workers, shard), parts,
                                        delay_s, shard * workers.size, f"server {sv}")
        elif delay_s > 0:
            steps = (Step((), lockstep=False, delay_s=delay_s, label=f"server {sv} update"),)
        chains.append(steps)
    return tuple(chains)


def ps_node_chains(
    size_bytes: float, group: Group, servers: Sequence[int], delay_s: float = 0.0, intra: str = "ring",
    partition_bytes: float | None = None,
) -> tuple[tuple[Step, ...], ...]:
    """Node-aggregated PS all-reduce: intra-node reduce-scatter, push / update / pull of each GPU's
    slice, intra-node all-gather (see the module docstring). Every node must hold as many GPUs."""
    servers = tuple(servers)
    _check(servers, delay_s)
    sizes = {len(node) for node in group.nodes}
    if len(sizes) > 1:
        raise ValueError(f"ps aggregation 'node' needs the same number of GPUs on every node, got {sorted(sizes)}")
    per_node = sizes.pop() if sizes else 1
    part = size_bytes / per_node / len(servers)  # one GPU's slice of one server's shard
    workers = np.repeat(np.asarray([w for node in group.nodes for w in node], dtype=np.int64), len(servers))
    shards = np.tile(np.asarray(servers, dtype=np.int64), workers.size // len(servers) if servers else 0)
    off = workers != shards  # (worker, server) pairs in worker-major order, a worker's own shard left out
    push, pull = _array(workers[off], shards[off], part), _array(shards[off], workers[off], part)
    local = [node for node in group.nodes if len(node) > 1]
    steps: list[Step] = list(merge_parallel([flat_chain(intra, CollectiveOp.REDUCE_SCATTER, size_bytes, node)
                                             for node in local]))
    if len(push):
        senders = np.unique(push.src)
        steps += pipelined_push_pull(push, pull, _partitions(part, partition_bytes), delay_s,
                                     part * len(senders), "node-aggregated slices")
    elif delay_s > 0:
        steps.append(Step((), lockstep=False, delay_s=delay_s, label="server update"))
    steps += merge_parallel([flat_chain(intra, CollectiveOp.ALL_GATHER, size_bytes, node) for node in local])
    return (tuple(steps),)
