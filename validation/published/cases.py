"""The published-benchmark cases: measured figures from public sources, each with the scenario that models it.

`cases.yaml` (next to this module, shipped as package data) is the data; this module parses it into frozen `PublishedCase`s and
refuses a case that lacks its source, its quote, its configuration or its scenario, so that no figure
enters the suite without the text it was read from.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum
from importlib.resources import files
from pathlib import Path
from typing import Any, Mapping

import yaml

from simdist.errors import Issue, ScenarioError

PACKAGE = "simdist.validation.published"
PACKAGE_DATA = ("cases.yaml", "scenarios/*.yaml", "scenarios/tpu/*.yaml")   # what pyproject.toml ships with the package (one copy)


def shipped_cases_file() -> Path:
    """The shipped data file, located as package data (importlib.resources): the same file in a checkout and
    in an installed wheel (pyproject.toml's package-data for simdist.validation.published ships it and scenarios/)."""
    return Path(str(files(PACKAGE).joinpath("cases.yaml")))


CASES_FILE = shipped_cases_file()
HERE = CASES_FILE.parent


class Metric(StrEnum):
    """What a case's number measures."""

    BUSBW_GBPS = "busbw_GBps"                   # nccl-tests bus bandwidth of one collective at one size
    SCALING_EFFICIENCY = "scaling_efficiency"   # throughput(N GPUs) / (N x throughput(1 GPU)); with a baseline
    #                                             run of M GPUs: (throughput / baseline's) / (N / M), weak scaling
    THROUGHPUT_RATIO = "throughput_ratio"       # samples/s of `scenario` / samples/s of `baseline`
    TFLOPS_PER_GPU = "tflops_per_gpu"           # achieved TFLOP/s per GPU of a training run (recomputation counted)
    TOKENS_PER_S_PER_GPU = "tokens_per_s_per_gpu"  # a transformer run's training tokens/s over its GPUs
    SAMPLES_PER_S_PER_GPU = "samples_per_s_per_gpu"  # a training run's samples/s over its GPUs (one GPU: compute)


METRICS: dict[str, Metric] = {m.value: m for m in Metric}
CASE_KEYS = {"name", "category", "metric", "measured", "source", "quote", "config", "scenario", "baseline",
             "size", "group", "tags", "reason", "reserved_check", "note", "anchor"}
ANCHOR_KEYS = {"single_gpu_throughput", "quote"}
REQUIRED = ("name", "category", "metric", "measured", "source", "quote", "config", "scenario", "reserved_check")
SOURCE_KEYS = {"repo", "issue", "pr", "file", "commit", "paper", "section", "url", "where"}
SCENARIO_KEYS = {"file", "set"}


@dataclass(frozen=True)
class ScenarioRef:
    """A scenario file (relative to validation/published/) and `--set` overrides applied to it."""

    file: Path
    overrides: tuple[str, ...] = ()

    def describe(self) -> str:
        rel = self.file.relative_to(HERE) if self.file.is_relative_to(HERE) else self.file
        return " ".join([str(rel), *(f"--set {o}" for o in self.overrides)])


@dataclass(frozen=True)
class PublishedCase:
    """One measured figure, where it was read, and how simdist models it."""

    name: str
    category: str
    metric: Metric
    measured: float
    source: Mapping[str, Any]
    quote: str
    config: str
    scenario: ScenarioRef
    reserved_check: str
    baseline: ScenarioRef | None = None
    size: str | None = None
    group: str | None = None
    tags: tuple[str, ...] = ()
    reason: str | None = None
    note: str | None = None
    # the source's own single-GPU samples/s (scaling-efficiency cases): the suite also predicts the case with
    # workload.single_gpu_throughput set to it and reports that "anchored" figure apart from the plain one
    anchor: float | None = None
    anchor_quote: str | None = None

    def source_text(self) -> str:
        """One line naming the source: repository + issue/PR/file, or paper + section."""
        s = self.source
        if "paper" in s:
            return f"{s['paper']}" + (f", {s['section']}" if "section" in s else "")
        parts = [str(s.get("repo", ""))]
        for key, mark in (("issue", "#"), ("pr", "PR #")):
            if key in s:
                parts.append(f"{mark}{s[key]}")
        if "file" in s:
            parts.append(str(s["file"]))
        return " ".join(p for p in parts if p)


@dataclass(frozen=True)
class CaseFile:
    """The whole data file: its cases, the name of the fitting subset, and the reserved-source check."""

    cases: tuple[PublishedCase, ...]
    fit_subset: str
    fitted: str
    reserved_sources_checked: str
    path: Path = field(default=CASES_FILE)


def _scenario_ref(raw: Any, where: str) -> ScenarioRef:
    if not isinstance(raw, Mapping) or "file" not in raw or set(raw) - SCENARIO_KEYS:
        raise ScenarioError(Issue(where, f"got {raw!r}; expected {{file: scenarios/X.yaml, set: [key=value, ...]}}"))
    sets = raw.get("set") or []
    if not isinstance(sets, list) or not all(isinstance(s, str) and "=" in s for s in sets):
        raise ScenarioError(Issue(f"{where}.set", f"got {sets!r}; expected a list of 'dotted.key=value' strings"))
    path = Path(os.path.normpath(HERE / str(raw["file"])))   # symlinks kept: the path stays under HERE
    if not path.is_file():
        raise ScenarioError(Issue(f"{where}.file", f"got {raw['file']!r}; no such file under {HERE}"))
    return ScenarioRef(path, tuple(sets))


def _case(raw: Any, i: int) -> PublishedCase:
    where = f"cases[{i}]"
    if not isinstance(raw, Mapping):
        raise ScenarioError(Issue(where, f"got {type(raw).__name__}; expected a mapping"))
    where = f"cases[{i}] ({raw.get('name', '?')})"
    unknown = set(raw) - CASE_KEYS
    missing = [k for k in REQUIRED if raw.get(k) in (None, "", [], {})]
    issues = [Issue(f"{where}.{k}", "unknown key") for k in sorted(unknown)]
    issues += [Issue(f"{where}.{k}", "missing: every case needs it") for k in missing]
    if issues:
        raise ScenarioError(issues)
    if raw["metric"] not in METRICS:
        raise ScenarioError(Issue(f"{where}.metric", f"got {raw['metric']!r}; expected one of {sorted(METRICS)}"))
    metric = METRICS[raw["metric"]]
    source = raw["source"]
    if not isinstance(source, Mapping) or set(source) - SOURCE_KEYS or not ({"repo", "paper"} & set(source)):
        raise ScenarioError(Issue(f"{where}.source", f"got {source!r}; expected repo (+ issue/pr/file) or paper "
                                                     f"(+ section), keys from {sorted(SOURCE_KEYS)}"))
    measured = raw["measured"]
    if isinstance(measured, bool) or not isinstance(measured, (int, float)) or measured <= 0:
        raise ScenarioError(Issue(f"{where}.measured", f"got {measured!r}; expected a positive number"))
    baseline = _scenario_ref(raw["baseline"], f"{where}.baseline") if raw.get("baseline") else None
    if metric is Metric.THROUGHPUT_RATIO and baseline is None:
        raise ScenarioError(Issue(f"{where}.baseline", "a throughput_ratio case needs a baseline scenario"))
    if baseline is not None and metric not in (Metric.THROUGHPUT_RATIO, Metric.SCALING_EFFICIENCY):
        raise ScenarioError(Issue(f"{where}.baseline", f"got a baseline for a {metric.value} case; only "
                                                       "throughput_ratio and scaling_efficiency cases take one"))
    if (metric is Metric.BUSBW_GBPS) != bool(raw.get("size")):
        raise ScenarioError(Issue(f"{where}.size", "a busbw_GBps case needs the message size it was measured "
                                                   "at (e.g. '512 MB'); other metrics take none"))
    tags = raw.get("tags") or []
    anchor = raw.get("anchor")
    if anchor is not None:
        a = anchor.get("single_gpu_throughput") if isinstance(anchor, Mapping) else None
        if (not isinstance(anchor, Mapping) or set(anchor) != ANCHOR_KEYS or isinstance(a, bool)
                or not isinstance(a, (int, float)) or a <= 0 or not str(anchor.get("quote") or "").strip()):
            raise ScenarioError(Issue(f"{where}.anchor", f"got {anchor!r}; expected {{single_gpu_throughput: "
                                                         "samples/s > 0, quote: the source's text with it}"))
        if metric is not Metric.SCALING_EFFICIENCY or baseline is not None:
            raise ScenarioError(Issue(f"{where}.anchor", "only scaling_efficiency cases against one GPU take an "
                                                         "anchor (their single-GPU baseline); not with a baseline run"))
    return PublishedCase(
        name=str(raw["name"]), category=str(raw["category"]), metric=metric, measured=float(measured),
        source=dict(source), quote=str(raw["quote"]).strip(), config=str(raw["config"]).strip(),
        scenario=_scenario_ref(raw["scenario"], f"{where}.scenario"), reserved_check=str(raw["reserved_check"]),
        baseline=baseline, size=raw.get("size"), group=raw.get("group"), tags=tuple(str(t) for t in tags),
        reason=raw.get("reason"), note=raw.get("note"),
        anchor=float(anchor["single_gpu_throughput"]) if anchor else None,
        anchor_quote=str(anchor["quote"]).strip() if anchor else None)


def load_cases(path: str | Path = CASES_FILE) -> CaseFile:
    """Parse the data file; raises ScenarioError naming every malformed case."""
    p = Path(path)
    data = yaml.safe_load(p.read_text())
    if not isinstance(data, Mapping) or not isinstance(data.get("cases"), list):
        raise ScenarioError(Issue(str(p), "expected a mapping with a 'cases' list"))
    for key in ("fit_subset", "fitted", "reserved_sources_checked"):
        if not data.get(key):
            raise ScenarioError(Issue(f"{p}:{key}", "missing"))
    cases, issues = [], []
    for i, raw in enumerate(data["cases"]):
        try:
            cases.append(_case(raw, i))
        except ScenarioError as err:
            issues.extend(err.issues)
    names = [c.name for c in cases]
    issues += [Issue(f"cases ({n})", "duplicate name") for n in sorted({n for n in names if names.count(n) > 1})]
    if issues:
        raise ScenarioError(issues)
    return CaseFile(tuple(cases), str(data["fit_subset"]), str(data["fitted"]),
                    str(data["reserved_sources_checked"]), p)
