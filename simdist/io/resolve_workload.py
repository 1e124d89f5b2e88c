"""Workload section -> WorkloadSpec: model catalog, parametric transformers, layer lists, torch, benchmarks.

The model catalog (simdist.workload) and the torch importer are imported only when used,
so a scenario without a `torch:` model never imports torch.
"""
from __future__ import annotations

import importlib
from dataclasses import replace
from types import ModuleType

from simdist.collectives.schedule import CollectiveOp
from simdist.errors import Issue, ScenarioError
from simdist.io.catalog import host_cpu_catalog
from simdist.io.fields import unknown_key_message
from simdist.io.resolve_cluster import guarded
from simdist.io.schema import BertWrapper, GptWrapper, LayersModel, TorchModel, WorkloadModel
from simdist.scenario import BenchmarkSpec, InputPipelineSpec, Precision, WorkloadSpec
from simdist.workload.specs import ModelSpec


def model_catalog() -> ModuleType:
    """simdist.workload's public API (get_model, model_keys, parametric_*, model_from_layers), imported lazily."""
    return importlib.import_module("simdist.workload")


KERNEL_KEYS = ("flash_attention", "dropout", "fused_kernels", "causal_attention")  # per-block kernel choices


def kernel_options(w: WorkloadModel) -> dict:
    """The per-block kernel keys the scenario gives (None: the model's default)."""
    return {k: getattr(w, k) for k in KERNEL_KEYS if getattr(w, k) is not None}


def _catalog_model(key: str, seq_len: int | None, issues: list[Issue], options: dict | None = None) -> ModelSpec | None:
    cat = model_catalog()
    options = options or {}
    if options and key in cat.model_keys() and cat.default_seq_len(key) is None:  # a CNN
        for k in options:
            issues.append(Issue(f"workload.{k}", f"got {options[k]!r}; {key} is not a transformer (the key sets "
                                                 "attention and dropout kernels of transformer blocks)"))
        return None
    try:
        return cat.get_model(key, seq_len, **options)
    except KeyError:
        issues.append(Issue("workload.model", unknown_key_message(key, list(cat.model_keys()), "model")))
    except ValueError as err:  # a bad sequence length, or an option the model refuses (causal_attention: encoders)
        option = next((k for k in options if str(err).startswith(k)), None)
        issues.append(Issue(f"workload.{option}" if option else "workload.seq_len", str(err)))
    return None


def _parametric(m: GptWrapper | BertWrapper, seq_len: int | None, issues: list[Issue],
                options: dict | None = None) -> ModelSpec | None:
    family = "gpt" if isinstance(m, GptWrapper) else "bert"
    p = m.gpt if isinstance(m, GptWrapper) else m.bert
    path = f"workload.model.{family}"
    ok = True
    if p.hidden % p.heads:
        issues.append(Issue(f"{path}.heads", f"got {p.heads}; must divide hidden ({p.hidden})"))
        ok = False
    if seq_len is None:
        issues.append(Issue("workload.seq_len", f"required key is missing (a {family} model needs a sequence length)"))
        ok = False
    if not ok:
        return None
    build = getattr(model_catalog(), f"parametric_{family}")
    return guarded(issues, path, lambda: build(p.layers, p.hidden, p.heads, p.vocab, seq_len, p.ffn_hidden,
                                               **(options or {})))


def _torch(m: TorchModel, issues: list[Issue]) -> ModelSpec | None:
    try:
        importer = importlib.import_module("simdist.workload.torch_import")
    except ImportError as err:
        issues.append(Issue("workload.model.torch", f"a torch model needs PyTorch installed ({err})"))
        return None

    def call() -> ModelSpec:
        try:
            return importer.import_model(m.torch, list(m.input_shape))
        except (ScenarioError, KeyError, ValueError, TypeError):
            raise
        except Exception as err:  # noqa: BLE001 - the user's factory or forward may raise anything
            raise ValueError(f"{m.torch!r} failed: {type(err).__name__}: {err}") from None

    return guarded(issues, "workload.model.torch", call)


def with_capacity_factor(model: ModelSpec | None, w: WorkloadModel, issues: list[Issue]) -> ModelSpec | None:
    """The model with `workload.moe_capacity_factor` as its MoE layers' capacity factor (a mixture-of-experts model
    only: every catalog MoE model is dropless by default)."""
    cf = w.moe_capacity_factor
    if cf is not None and w.model is None:
        issues.append(Issue("workload.moe_capacity_factor", f"got {cf!r}; a collective benchmark has no experts: "
                                                            "remove the key"))
    if cf is None or model is None:
        return model
    if model.moe is None:
        issues.append(Issue("workload.moe_capacity_factor", f"got {cf!r}; {model.name} has no mixture-of-experts "
                                                            "layers (a capacity factor caps the tokens of an expert)"))
        return model
    return replace(model, moe=replace(model.moe, capacity_factor=float(cf)))


def resolve_model(w: WorkloadModel, issues: list[Issue]) -> ModelSpec | None:
    model = with_capacity_factor(_model(w, issues), w, issues)
    if w.causal_attention and model is not None:
        cores = [x for x in model.layers if x.kind == "attention"]
        if not cores or any(x.fwd_kernels for x in cores):
            issues.append(Issue("workload.causal_attention", "got true; only a flash-attention core skips the masked "
                                "tiles (an unfused core computes the whole s x s scores, masked or not): set "
                                "workload.flash_attention: true"))
    return model


def _model(w: WorkloadModel, issues: list[Issue]) -> ModelSpec | None:
    m = w.model
    options = kernel_options(w)
    if m is None or (options and isinstance(m, (TorchModel, LayersModel))):
        for k in options:
            what = "a benchmark" if m is None else "a model given as layers or torch"
            issues.append(Issue(f"workload.{k}", f"got {options[k]!r}; {what} has no transformer blocks to apply it "
                                                 "to (a catalog transformer, {gpt: ...} or {bert: ...})"))
        return None
    if isinstance(m, str):
        return _catalog_model(m, w.seq_len, issues, options)
    if isinstance(m, (GptWrapper, BertWrapper)):
        return _parametric(m, w.seq_len, issues, options)
    if isinstance(m, TorchModel):
        return _torch(m, issues)
    assert isinstance(m, LayersModel)
    cat = model_catalog()
    return guarded(issues, "workload.model.layers",
                   lambda: cat.model_from_layers([dict(layer) for layer in m.layers], m.name))


def resolve_workload(w: WorkloadModel, issues: list[Issue]) -> WorkloadSpec | None:
    """WorkloadSpec, or None with the reasons appended (exactly one of model / benchmark)."""
    if (w.model is None) == (w.benchmark is None):
        which = "both are given" if w.model is not None else "neither is given"
        issues.append(Issue("workload", f"give exactly one of `model` or `benchmark` ({which})"))
        return None
    if w.model is not None and (w.batch_per_gpu is None) == (w.global_batch is None):
        which = "both are given" if w.batch_per_gpu is not None else "neither is given"
        issues.append(Issue("workload.batch_per_gpu", f"give exactly one of `batch_per_gpu` or `global_batch` ({which})"))
    model = resolve_model(w, issues)
    benchmark = None
    if w.benchmark is not None:
        benchmark = BenchmarkSpec(CollectiveOp(w.benchmark.op), tuple(w.benchmark.sizes))
    elif model is None:
        return None
    pipeline = None
    if w.input_pipeline is not None:
        if benchmark is not None:
            issues.append(Issue("workload.input_pipeline", "a collective benchmark has no data loader; remove the key"))
        p = w.input_pipeline

        cpus = host_cpu_catalog()
        measured_on = p.measured_on
        if measured_on is None and "cpu_per_sample" not in p.model_fields_set:
            measured_on = cpus.reference  # the default cost was measured on the catalog's reference CPU
        known = cpus.keys()
        for key, value in (("measured_on", p.measured_on), ("host_cpu", p.host_cpu)):
            if value is not None and value not in known:
                issues.append(Issue(f"workload.input_pipeline.{key}", f"got {value!r}; expected a host CPU of the "
                                                                       f"catalog: {', '.join(sorted(known))}"))
        if p.measured_on not in (None, cpus.reference) and "cpu_per_sample" not in p.model_fields_set:
            issues.append(Issue("workload.input_pipeline.measured_on", f"got {p.measured_on!r} with the default "
                                f"cpu_per_sample, which was measured on {cpus.reference!r}: set cpu_per_sample "
                                "to the figure measured on that CPU, or remove the key"))
        pipeline = InputPipelineSpec(cpu_s_per_sample=p.cpu_per_sample, workers_per_gpu=p.workers_per_gpu,
                                     host_cores=p.host_cores, measured_on=measured_on, host_cpu=p.host_cpu,
                                     cpus=cpus)
    if w.memory_format != "native" and model is not None:
        if not any(layer.kind == "conv" for layer in model.layers):
            issues.append(Issue("workload.memory_format", f"got {w.memory_format!r}; the model has no convolutions "
                                                          "(the layout only changes conv layers): remove the key"))
    elif w.memory_format != "native" and benchmark is not None:
        issues.append(Issue("workload.memory_format", "a collective benchmark has no convolutions; remove the key"))
    if w.single_gpu_throughput is not None and benchmark is not None:
        issues.append(Issue("workload.single_gpu_throughput", "a collective benchmark has no compute to anchor; "
                                                              "remove the key"))
    return WorkloadSpec(model=model, benchmark=benchmark, batch_per_gpu=w.batch_per_gpu, global_batch=w.global_batch,
                        precision=Precision(w.precision), grad_dtype=Precision(w.grad_dtype), seq_len=w.seq_len,
                        input_pipeline=pipeline, single_gpu_throughput=w.single_gpu_throughput,
                        memory_format=w.memory_format)
