"""Host input pipeline: the node's CPU cores as the resource that feeds every GPU's training loop.

Real-data training decodes and augments each sample on the host (PyTorch DataLoader worker processes, DALI's
CPU threads, tf.data's parallel map) before the GPU sees it. The loader prefetches, so it costs nothing while
it keeps up and bounds the step when it cannot:

* a GPU's loader runs `workers_per_gpu` workers, but the node's `host_cores` physical cores are shared by the
  loaders of every GPU training on it and by each GPU's training process, whose own thread (Python, kernel
  launches, the pinned-memory copy) keeps one hardware thread busy: a whole core without SMT, 1 / t of one on
  a CPU with t threads per core (host_cpus.yaml), where it shares a core with a loader thread. With g GPUs of a
  node training, one GPU's loader gets min(workers, (host_cores - g / t) / g) cores; one GPU alone gets
  min(workers, host_cores - 1 / t);
* it then delivers cores / cpu_s_per_sample samples per second, and a step takes, in steady state,
  max(the GPU's step, samples per step / that rate) (the loader overlaps the GPU entirely: prefetching).

So the single-GPU baseline of a scaling efficiency has a whole node's cores where each of 8 GPUs has an eighth:
the faster the GPU step (mixed precision), the sooner the shared cores bind.

The cost per sample is a measurement on one CPU (`measured_on`; the default cost's is the catalog's reference
CPU, the machine benchmarks/input_pipeline_cpu.py ran on). On the node's CPU (host_cpus.yaml: the intra-node
entry's, or `host_cpu`) it is scaled by the two CPUs' per-core integer throughput (SPECrate2017_int_base per
physical core, every hardware thread busy: a hyperthread adds its fraction of a core inside that figure and is
never counted as a core). Not modelled: turbo clocks falling as more cores are busy, storage and page-cache
reads, GPU-side decoding (DALI's mixed decoder, A100's hardware JPEG decoder) that moves work off the CPU.
"""
from __future__ import annotations

from dataclasses import dataclass

from simdist.scenario import InputPipelineSpec


def _host(pipeline: InputPipelineSpec, intra_node_key: str | None) -> str | None:
    """The nodes' CPU key: `host_cpu`, else the intra-node entry's (None: unknown, or no catalog resolved)."""
    if pipeline.host_cpu or pipeline.cpus is None:
        return pipeline.host_cpu
    return pipeline.cpus.node_cpu(intra_node_key) if intra_node_key else None


@dataclass(frozen=True)
class CpuScaling:
    """The cost per sample on the nodes' CPU: measured cost x score(measured_on) / score(host CPU)."""

    cpu_s_per_sample: float  # on the nodes' CPU
    host_cpu: str | None  # None: unknown, the measured cost is used as it is
    factor: float  # score(measured_on) / score(host CPU); 1.0 when either is unknown
    note: str

    def to_dict(self) -> dict:
        return {"host_cpu": self.host_cpu, "cpu_speed_factor": self.factor,
                "cpu_s_per_sample_on_host": self.cpu_s_per_sample, "cpu_scaling": self.note}


def scaled_cost(pipeline: InputPipelineSpec, intra_node_key: str | None = None) -> CpuScaling:
    """The loader's core-seconds per sample on the CPU of a node of intra-node entry `intra_node_key`."""
    host = _host(pipeline, intra_node_key)
    cost = pipeline.cpu_s_per_sample
    if pipeline.measured_on is None:
        return CpuScaling(cost, host, 1.0, "cpu_per_sample taken as measured on the nodes' own CPU (no scaling)")
    if host is None or pipeline.cpus is None:
        return CpuScaling(cost, None, 1.0, f"the nodes' CPU is unknown (intra node {intra_node_key!r} has no "
                                           f"host_cpus.yaml entry, no host_cpu set): cost as measured on "
                                           f"{pipeline.measured_on} (fallback, no scaling)")
    cpus = pipeline.cpus
    factor = cpus.cpu(pipeline.measured_on).per_core_score / cpus.cpu(host).per_core_score
    return CpuScaling(cost * factor, host, factor, f"measured on {pipeline.measured_on}, scaled to {host} by "
                                                   "per-core SPECrate2017_int_base")


def threads_per_core(pipeline: InputPipelineSpec, intra_node_key: str | None = None) -> float:
    """Hardware threads per physical core of the nodes' CPU (host_cpus.yaml threads / cores; 1.0 unknown)."""
    host = _host(pipeline, intra_node_key)
    if host is None or pipeline.cpus is None:
        return 1.0
    cpu = pipeline.cpus.cpu(host)
    return cpu.threads / cpu.cores


def loader_cores(pipeline: InputPipelineSpec, gpus_on_node: int, smt: float = 1.0) -> float:
    """CPU cores one GPU's loader runs on while `gpus_on_node` GPUs of its node train.

    Each GPU's training process keeps one hardware thread busy. With `smt` threads per core (2 on the DGX
    CPUs) that thread is a sibling of a loader thread and takes its share of the core, 1 / smt of it (the
    per-core score counts a core with every thread busy); without SMT (or unknown) it takes a whole core."""
    if gpus_on_node < 1:
        raise ValueError(f"gpus_on_node: got {gpus_on_node!r}; expected >= 1")
    if smt < 1.0:
        raise ValueError(f"smt: got {smt!r}; expected >= 1 hardware thread per core")
    free = (pipeline.host_cores - gpus_on_node / smt) / gpus_on_node  # one hardware thread per training process
    return max(0.0, min(float(pipeline.workers_per_gpu), free))


def loader_samples_per_s(pipeline: InputPipelineSpec, gpus_on_node: int, intra_node_key: str | None = None) -> float:
    """Samples per second one GPU's loader delivers on a node of that intra-node entry (0 when the training
    processes take every core)."""
    cores = loader_cores(pipeline, gpus_on_node, threads_per_core(pipeline, intra_node_key))
    return cores / scaled_cost(pipeline, intra_node_key).cpu_s_per_sample


@dataclass(frozen=True)
class LoaderBound:
    """What the input pipeline did to one run: the loader's time per optimizer step against the GPUs'."""

    loader_s: float  # the slowest node's loader: samples per rank per step / its rate
    gpu_iteration_s: float  # the step as simulated without the loader
    cores_per_gpu: float
    samples_per_s_per_gpu: float
    scaling: CpuScaling | None = None  # the slowest node's CPU scaling

    @property
    def bound(self) -> bool:
        return self.loader_s > self.gpu_iteration_s

    @property
    def iteration_s(self) -> float:
        return max(self.loader_s, self.gpu_iteration_s)

    def to_dict(self, pipeline: InputPipelineSpec) -> dict:
        return {"cpu_s_per_sample": pipeline.cpu_s_per_sample, "workers_per_gpu": pipeline.workers_per_gpu,
                "host_cores": pipeline.host_cores, "cores_per_gpu": self.cores_per_gpu,
                "samples_per_s_per_gpu": self.samples_per_s_per_gpu, "loader_s_per_iteration": self.loader_s,
                "gpu_iteration_s": self.gpu_iteration_s, "input_bound": self.bound,
                **(self.scaling.to_dict() if self.scaling else {})}


def loader_bound(pipeline: InputPipelineSpec, gpus_per_node: tuple, samples_per_rank,
                 gpu_iteration_s: float) -> LoaderBound:
    """The loader against a simulated step: every node group's loader must deliver its ranks' samples per
    step (BSP: the slowest node sets the step for all). `gpus_per_node`: per node group, its GPU count or
    (GPU count, intra-node catalog key); `samples_per_rank`: one figure for every group, or one per group
    (a heterogeneous cluster's split gives each group its own batch)."""
    groups = [g if isinstance(g, tuple) else (g, None) for g in gpus_per_node]
    samples = (list(samples_per_rank) if isinstance(samples_per_rank, (tuple, list))
               else [samples_per_rank] * len(groups))
    if len(samples) != len(groups):
        raise ValueError(f"samples_per_rank: got {len(samples)} figures for {len(groups)} node groups")
    rates = [loader_samples_per_s(pipeline, *g) for g in groups]
    times = [n / r if r > 0 else float("inf") for n, r in zip(samples, rates)]
    k = max(range(len(groups)), key=lambda i: times[i])
    worst = groups[k]
    return LoaderBound(times[k], gpu_iteration_s, loader_cores(pipeline, worst[0], threads_per_core(pipeline, worst[1])),
                       rates[k], scaled_cost(pipeline, worst[1]))
