"""What one core of this machine moves per second for gloo's host-side work: sums, copies and TCP socket copies.

gloo running over its TCP transport (gloo/transport/tcp) spends CPU time in three places that
simdist/collectives/host_reduce.py charges: the reduction a + b -> c of a received chunk into the rank's
buffer (gloo/allreduce_ring_chunked.h: fn_->call), copies between buffers (its memcpy of the inbox), and
the kernel's socket copies of every byte sent (writev in tcp/pair.cc: user buffer -> socket buffer) and
received (recv in tcp/pair.cc, called by the device's epoll loop thread, tcp/loop.cc: socket buffer -> user
buffer). This measures, on ONE core:

* add_Bps: numpy.add(a, b, out=c) on fp32 arrays of --mib MiB each, as bytes of memory traffic (read a and
  b, write c: 3 bytes per summed byte);
* memcpy_Bps: numpy.copyto(dst, src) of --mib MiB, as bytes of memory traffic (read + write: 2 per byte);
* tcp_Bps: a TCP connection over the loopback interface, a sender thread (sendall) and a receiver thread
  (recv_into a preallocated buffer), the process pinned to one core (os.sched_setaffinity), pushing --mib MiB:
  bytes delivered per second of that core. Every byte is copied into the kernel once and out once by the same
  core, with the TCP/IP stack's work on both ends, so this is the cost of one byte sent plus one byte received
  on one core (loopback skips the NIC's DMA and interrupts; a real NIC's receive processing may run on
  another core).

Each figure is the median of --repeats runs after one warm-up. Sums and copies are timed with thread CPU time
(other processes sharing the machine do not inflate them); the TCP transfer with wall time on the pinned core
(the two threads take turns on it; the kernel's softirq work is not charged to either thread), so run it on an
otherwise idle core. Usage:

    python benchmarks/host_copy_cpu.py [--repeats 7] [--mib 64] [--core 0]
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import threading
import time
from typing import Callable

import numpy as np


def median_s(fn: Callable[[], float], repeats: int) -> float:
    """Median over `repeats` runs of `fn` (which returns its own seconds), after one warm-up."""
    fn()
    return statistics.median(fn() for _ in range(repeats))


def cpu_timed(fn: Callable[[], object]) -> Callable[[], float]:
    """A callable that runs `fn` once and returns its thread CPU seconds."""
    def run() -> float:
        t0 = time.thread_time()
        fn()
        return time.thread_time() - t0
    return run


def tcp_push_s(payload: np.ndarray, inbox: np.ndarray) -> float:
    """Wall seconds to push `payload` through a loopback TCP connection into `inbox` (one sender thread,
    one receiver thread, on whatever cores the process may use)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    sender = socket.create_connection(listener.getsockname())
    receiver, _ = listener.accept()
    listener.close()
    for s in (sender, receiver):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as gloo's tcp/socket.cc sets it
    view = memoryview(inbox).cast("B")
    total = view.nbytes

    def receive() -> None:
        got = 0
        while got < total:
            n = receiver.recv_into(view[got:], total - got)
            if n == 0:
                raise ConnectionError("loopback peer closed early")
            got += n

    thread = threading.Thread(target=receive)
    t0 = time.perf_counter()
    thread.start()
    sender.sendall(memoryview(payload).cast("B"))
    thread.join()
    elapsed = time.perf_counter() - t0
    sender.close()
    receiver.close()
    return elapsed


def measure(repeats: int, mib: int, core: int) -> dict[str, float]:
    """Per-core rates in bytes per second: add_Bps and memcpy_Bps (memory traffic), tcp_Bps (payload)."""
    os.sched_setaffinity(0, {core})  # this thread and every thread it starts run on `core`
    n = mib * 2**20 // 4
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    c = np.empty_like(a)
    out = {"add_Bps": 3 * a.nbytes / median_s(cpu_timed(lambda: np.add(a, b, out=c)), repeats),
           "memcpy_Bps": 2 * a.nbytes / median_s(cpu_timed(lambda: np.copyto(c, a)), repeats)}
    out["tcp_Bps"] = a.nbytes / median_s(lambda: tcp_push_s(a, c), repeats)
    assert np.array_equal(a, c), "the loopback transfer corrupted the payload"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--mib", type=int, default=64, help="buffer size in MiB (default 64)")
    parser.add_argument("--core", type=int, default=0, help="the core to pin to (default 0)")
    args = parser.parse_args()
    rates = measure(args.repeats, args.mib, args.core)
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 "unknown CPU")
    print(f"one core ({model}), {args.mib} MiB buffers, median of {args.repeats}:")
    print(f"  add a+b->c   {rates['add_Bps'] / 1e9:6.2f} GB/s of memory traffic (3 bytes per summed byte)")
    print(f"  memcpy       {rates['memcpy_Bps'] / 1e9:6.2f} GB/s of memory traffic (2 bytes per copied byte)")
    print(f"  TCP loopback {rates['tcp_Bps'] / 1e9:6.2f} GB/s delivered (each byte sent and received on this core)")


if __name__ == "__main__":
    main()
