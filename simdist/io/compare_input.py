"""What `simdist compare` and `simdist.breakeven` take, checked before anything runs: the codec list (`--methods`),
the NIC bandwidths, and every codec variant of the scenario against io.rules (a codec the run would refuse, e.g.
with tp or pp, is refused here with its key); and a codec spec built in code (`check_codec`)."""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

from simdist.errors import Issue, ScenarioError
from simdist.io.rules import rules
from simdist.io.rules_training import codec_issues
from simdist.scenario import CompressionMethod, CompressionSpec, Scenario


def check_codec(spec: CompressionSpec) -> CompressionSpec:
    """A compression spec built in code (compare's --methods, validation's codecs): ScenarioError naming each
    parameter that does not belong to its method (io.rules_training.codec_issues, as a scenario's)."""
    issues = codec_issues(spec)
    if issues:
        raise ScenarioError(issues)
    return spec


def parse_methods(text: str) -> list[CompressionSpec]:
    """'fp16,int8,topk:0.01,powersgd:4' -> CompressionSpecs (topk/randomk take a ratio, powersgd a rank)."""
    specs, issues = [], []
    for i, token in enumerate(t.strip() for t in text.split(",")):
        path = f"--methods[{i}]"
        name, _, param = token.partition(":")
        try:
            method = CompressionMethod(name)
        except ValueError:
            issues.append(Issue(path, f"got {token!r}; expected one of {', '.join(m.value for m in CompressionMethod)}"))
            continue
        try:
            if method in (CompressionMethod.TOPK, CompressionMethod.RANDOMK):
                spec = CompressionSpec(method, ratio=float(param) if param else None)
            elif method == CompressionMethod.POWERSGD:
                spec = CompressionSpec(method, rank=int(param) if param else None)
            elif param:
                raise ValueError(f"{name} takes no parameter")
            else:
                spec = CompressionSpec(method)
        except ValueError as e:
            issues.append(Issue(path, f"{token!r}: {e}"))
            continue
        found = codec_issues(spec)
        if found:
            issues.append(Issue(path, f"{token!r}: " + "; ".join(x.message for x in found)))
            continue
        specs.append(spec)
    if not specs and not issues:
        issues.append(Issue("methods", "got no method; expected e.g. 'fp16,int8,topk:0.01,powersgd:4'"))
    if issues:
        raise ScenarioError(issues)
    return specs


def check_breakeven(scenario: Scenario, bandwidths_Bps: Sequence[float], methods: Sequence[CompressionSpec]) -> None:
    """ScenarioError naming everything compare.breakeven cannot run: a benchmark workload, a bandwidth that is not
    positive and finite, a codec variant the run rules refuse."""
    issues = []
    if scenario.workload.model is None:
        issues.append(Issue("workload", "compare needs a training workload (workload.model), not a benchmark"))
    if not bandwidths_Bps or any(not b > 0 or math.isinf(b) for b in bandwidths_Bps):
        issues.append(Issue("bandwidths", f"got {list(bandwidths_Bps)!r}; expected positive finite bandwidths"))
    if scenario.workload.model is not None:
        for spec in methods:
            variant = replace(scenario, communication=replace(scenario.communication, compression=spec))
            issues += [i for i in rules(variant) if i not in issues]
    if issues:
        raise ScenarioError(issues)
