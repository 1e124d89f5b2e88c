"""Host input pipeline: the node's CPU cores as the resource that feeds every GPU's training loop.

Real-data training decodes and augments each sample on the host (PyTorch DataLoader worker processes, DALI's
CPU threads, tf.data's parallel map) before the GPU sees it. The loader prefetches, so it costs nothing while
it keeps up and bounds the step when it cannot:

* a GPU's loader runs `workers_per_gpu` workers, but the node's `host_cores` physical cores are shared by the
  loaders of every GPU training on it and by each GPU's training process, whose own thread (Python, kernel
  launches, the pinned-memory copy) keeps one core busy. With g GPUs of a node training, one GPU's loader gets
  min(workers, (host_cores - g) / g) cores; one GPU alone gets min(workers, host_cores - 1);
* it then delivers cores / cpu_s_per_sample samples per second, and a step takes, in steady state,
  max(the GPU's step, samples per step / that rate) (the loader overlaps the GPU entirely: prefetching).

So the single-GPU baseline of a scaling efficiency has a whole node's cores where each of 8 GPUs has an eighth:
the faster the GPU step (mixed precision), the sooner the shared cores bind. Not modelled: hyperthreads (a
sibling adds a fraction of a core), turbo clocks falling as more cores are busy, storage and page-cache
reads, GPU-side decoding (DALI's mixed decoder, A100's hardware JPEG decoder) that moves work off the CPU.
"""
from __future__ import annotations

from dataclasses import dataclass

from simdist.scenario import InputPipelineSpec


def loader_cores(pipeline: InputPipelineSpec, gpus_on_node: int) -> float:
    """CPU cores one GPU's loader runs on while `gpus_on_node` GPUs of its node train."""
    if gpus_on_node < 1:
        raise ValueError(f"gpus_on_node: got {gpus_on_node!r}; expected >= 1")
    free = (pipeline.host_cores - gpus_on_node) / gpus_on_node  # one core per training process
    return max(0.0, min(float(pipeline.workers_per_gpu), free))


def loader_samples_per_s(pipeline: InputPipelineSpec, gpus_on_node: int) -> float:
    """Samples per second one GPU's loader delivers (0 when the training processes take every core)."""
    return loader_cores(pipeline, gpus_on_node) / pipeline.cpu_s_per_sample


@dataclass(frozen=True)
class LoaderBound:
    """What the input pipeline did to one run: the loader's time per optimizer step against the GPUs'."""

    loader_s: float  # the slowest node's loader: samples per rank per step / its rate
    gpu_iteration_s: float  # the step as simulated without the loader
    cores_per_gpu: float
    samples_per_s_per_gpu: float

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
                "gpu_iteration_s": self.gpu_iteration_s, "input_bound": self.bound}


def loader_bound(pipeline: InputPipelineSpec, gpus_per_node: tuple[int, ...], samples_per_rank: float,
                 gpu_iteration_s: float) -> LoaderBound:
    """The loader against a simulated step: every node group's loader must deliver `samples_per_rank` per step
    (BSP: the slowest node sets the step for all)."""
    worst = min(gpus_per_node, key=lambda g: loader_samples_per_s(pipeline, g))
    rate = loader_samples_per_s(pipeline, worst)
    loader_s = samples_per_rank / rate if rate > 0 else float("inf")
    return LoaderBound(loader_s, gpu_iteration_s, loader_cores(pipeline, worst), rate)
