"""Rules about Google TPUs (catalog vendor `google`) and the torus3d all-reduce.

A TPU runs what XLA compiles for it: its MXUs compute in bf16 (and fp8 at the bf16 rate on v5p), so a precision
the chip has no figure for (fp16, tf32, fp8 on v4, the block-scaled formats) is refused rather than run on other
units; its collectives are XLA's over the ICI torus, not NCCL's or gloo's (backend textbook runs exactly the
algorithm asked for, torus3d being XLA's dimension-by-dimension collectives). Model parallelism on TPUs is GSPMD
sharding over the torus axes. Its 1-D model parallelism with a fully sharded data axis (PaLM's 12-way model
parallelism with FSDP; Xu et al. 2021, GSPMD) is Megatron's tensor parallelism with ZeRO-3: the same per-block
all-gathers and reduce-scatters (or all-reduces) of activations over the model axis and of weights and gradients
over the data axis. That is accepted (tp with zero 3 on a torus3d fabric, tp innermost so that each tp group is a
run of consecutive chips along the torus's last dimension); pp, cp, ep and ZeRO 1/2 are refused on TPUs instead
of being priced as something they are not.

torus3d lays the ranks on the shape a torus3d fabric of that many machines takes without dims
(collectives/torus3d.py): a count without such a shape is refused, and so is a torus3d fabric of one-GPU nodes
whose dims differ from it (the same torus written longest side first, or a shape the schedule would not follow).
A torus3d fabric of TPUs needs every side a multiple of 4: smaller slices have no wrap-around links. Each chip is
a one-chip node while four share a host, so a host input pipeline is refused on TPUs.
"""
from __future__ import annotations

import math

import simdist.layout as layout  # lazy (simdist.LAZY_MODULES): read only for TPUs with tp > 1
from simdist.collectives.torus3d import grid_dims
from simdist.topology.direct import default_dims
from simdist.errors import Issue
from simdist.hardware.specs import TopologyKind
from simdist.scenario import Backend, Scenario, StrategyKind

UNMODELLED_AXES = ("pp", "cp", "ep")


def tpu_keys(scenario: Scenario) -> list[str]:
    """The catalog keys of the scenario's TPU node groups, in order."""
    return list(dict.fromkeys(g.gpu.key for g in scenario.cluster.node_groups if g.gpu.is_tpu))


def _precision_issues(scenario: Scenario, tpus: list[str]) -> list[Issue]:
    w = scenario.workload
    if w.model is None:
        return []
    lacking = [g.gpu.key for g in scenario.cluster.node_groups
               if g.gpu.is_tpu and w.precision.value not in g.gpu.peak_flops]
    if not lacking:
        return []
    return [Issue("workload.precision", f"got {w.precision.value!r}; {', '.join(dict.fromkeys(lacking))} has no "
                                        f"{w.precision.value} units (a TPU's MXUs compute bf16; fp8 on v5p at the "
                                        "bf16 rate): use bf16, or fp32 (full-precision matmuls as six bf16 passes)")]


def _parallel_issues(scenario: Scenario, tpus: list[str]) -> list[Issue]:
    """GSPMD's 1-D model parallelism with fully sharded data parallelism (tp with zero 3 on the ICI torus, tp
    innermost) is what simdist models on TPUs; every other model-parallel sharding is refused."""
    p, t = scenario.training.parallelism, scenario.training
    out = [Issue(f"training.parallelism.{axis}", f"got {getattr(p, axis)}; on TPUs ({', '.join(tpus)}) simdist models "
                                                 "GSPMD's 1-D model parallelism (tp with zero 3) only: pipeline, "
                                                 "context and expert sharding over the torus axes are not modelled "
                                                 "(docs/catalog.md, 'Google TPU pods')")
           for axis in UNMODELLED_AXES if getattr(p, axis, 1) > 1]
    if p.zero in (1, 2):
        out.append(Issue("training.parallelism.zero", f"got {p.zero}; on TPUs simdist models XLA's fully sharded data "
                                                      "parallelism (zero 3: weights all-gathered and gradients reduce-"
                                                      "scattered along the torus dimensions) or replicated data "
                                                      "parallelism (zero 0)"))
    if p.tp > 1:
        if p.zero != 3:
            out.append(Issue("training.parallelism.tp", f"got {p.tp} with zero {p.zero}; GSPMD's 1-D model parallelism "
                                                        "on TPUs is modelled with the data axis fully sharded, as PaLM "
                                                        "ran it: set training.parallelism.zero 3"))
        if scenario.cluster.fabric.topology != TopologyKind.TORUS3D:
            out.append(Issue("training.parallelism.tp", f"got {p.tp}; model parallelism on TPUs runs over the ICI "
                                                        "torus: use a torus3d fabric"))
        if layout.parse_order(t.placement_order)[0] != layout.Axis.TP:
            out.append(Issue(layout.ORDER_KEY, f"got {t.placement_order!r}; on TPUs the model-parallel axis is the "
                                               "innermost (each tp group tp consecutive chips along the torus's last "
                                               "dimension, the data axis the rest): start the order with tp"))
    return out


def _backend_issues(scenario: Scenario, tpus: list[str]) -> list[Issue]:
    backend = scenario.communication.backend
    if backend == Backend.TEXTBOOK:
        return []
    return [Issue("communication.backend", f"got {backend.value!r}; NCCL and gloo do not run on TPUs "
                                           f"({', '.join(tpus)}): XLA's collectives over the ICI torus are backend "
                                           "textbook (with strategy torus3d, XLA's dimension-by-dimension all-reduce)")]


def torus3d_issues(scenario: Scenario) -> list[Issue]:
    """communication.strategy torus3d on a rank count without a 3-D shape, or on a torus3d fabric of one-GPU
    nodes whose dims are not the shape the schedule lays the ranks on."""
    if scenario.communication.strategy != StrategyKind.TORUS3D:
        return []
    c = scenario.cluster
    n = c.num_gpus
    shape = grid_dims(n)
    if math.prod(shape) != n:
        return [Issue("communication.strategy", f"got 'torus3d'; {n} GPUs have no 3-D shape with sides within 4x of "
                                                f"each other (the nearest, {'x'.join(map(str, shape))}, has holes): "
                                                "use ring or torus2d")]
    fabric = c.fabric
    one_per_node = all(g.gpus_per_node == 1 for g in c.node_groups)
    if (fabric.topology == TopologyKind.TORUS3D and fabric.dims and one_per_node
            and tuple(fabric.dims) != shape):
        return [Issue("cluster.fabric.dims", f"got {list(fabric.dims)}; strategy torus3d lays the {n} ranks on "
                                             f"{list(shape)} (longest side first, the most balanced shape): write "
                                             f"dims {list(shape)}" + (" (the same torus)" if sorted(fabric.dims)
                                                                      == sorted(shape) else ""))]
    return []


def _slice_issues(scenario: Scenario, tpus: list[str]) -> list[Issue]:
    """A torus3d fabric of TPUs closes every dimension into a ring: real slices do only when each side is a
    multiple of 4 (4x4x4 cubes whose faces the optical circuit switches join); smaller ones are a mesh."""
    fabric = scenario.cluster.fabric
    if fabric.topology != TopologyKind.TORUS3D:
        return []
    dims = tuple(fabric.dims) if fabric.dims else default_dims(scenario.cluster.num_nodes, 3)
    if all(d % 4 == 0 for d in dims):
        return []
    return [Issue("cluster.fabric.dims", f"got {list(dims)}; a TPU slice ({', '.join(tpus)}) is a torus only when "
                                         "every side is a multiple of 4 (4x4x4 cubes joined by the optical circuit "
                                         "switches); smaller slices are a 3-D mesh without wrap-around, which the "
                                         "torus3d fabric does not describe")]


def _host_issues(scenario: Scenario, tpus: list[str]) -> list[Issue]:
    """Four TPU chips share one host (a 2x2x1 tray), but each chip is its own node here: a host input pipeline
    would get a whole host per chip."""
    if scenario.workload.input_pipeline is None:
        return []
    return [Issue("workload.input_pipeline", f"set; the chips of {', '.join(tpus)} are one-chip nodes here while "
                                             "four share a TPU host, so each chip's loader would get a whole host: "
                                             "host input pipelines are not modelled on TPUs (leave it unset: data "
                                             "ready on the chip)")]


def tpu_issues(scenario: Scenario) -> list[Issue]:
    """Every TPU rule and the torus3d rule, each problem with its YAML path."""
    tpus = tpu_keys(scenario)
    out = torus3d_issues(scenario)
    if tpus:
        out += (_precision_issues(scenario, tpus) + _parallel_issues(scenario, tpus) + _backend_issues(scenario, tpus)
                + _slice_issues(scenario, tpus) + _host_issues(scenario, tpus))
    return out
