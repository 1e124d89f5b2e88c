"""The steps of a successive-halving plan (halving.py has the ladder, the sizes and the rules): the bound
rung over the whole space, the estimate rung, and the simulation rungs."""
from __future__ import annotations

import math
import random
from typing import Any, Sequence

from simdist.planner.axes import points_at
from simdist.planner.bound import is_compute_free
from simdist.planner.evaluate import Job, _conjuncts
from simdist.planner.halving import Rung, best, entering, rung_caps, tie_order
from simdist.planner.objective import PlanSpec, drop_reason
from simdist.planner.prune import bound_score
from simdist.planner.rows import INPUT_NAMES


def estimate_rungs(spec: PlanSpec, rungs: Sequence[Rung], space: int, bound_of, inputs_of,
                   constraints: Sequence[str], estimate, rows: dict, run, log: list[dict[str, Any]],
                   local_search) -> str:
    """The rungs up to and including the estimate rung: the bound rung over the whole space (when the
    ladder starts with one) keeps the best of it by its class bound, then those are estimated (with the
    exact compute-bound skipping) and the local search runs around the best; returns the plan's header text."""
    caps = rung_caps(rungs, spec.max_points, spec.confirm, spec.eta)
    est_at = next(i for i, r in enumerate(rungs) if r.kind == "estimate")
    parts = [f"successive halving (eta {spec.eta}, rungs {','.join(r.name for r in rungs)})"]
    if rungs[0].kind == "bound":
        n = entering(space, spec.eta, caps[est_at])
        kept, classes, unbounded, excluded = bound_rung(spec, n, bound_of, inputs_of, constraints)
        log.append({"rung": "bound", "entered": space, "evaluated": classes, "unbounded_classes": unbounded,
                    "excluded_by_constraints": excluded, "promoted": len(kept)})
        parts.append(f"bound {space} ({classes} compute classes{f', {unbounded} without a bound' if unbounded else ''}"
                     f"{f'; {excluded} excluded by constraints' if excluded else ''})")
    else:
        n = min(space, caps[est_at] or space)
        kept = sorted(random.Random(spec.seed).sample(range(space), n))
        parts.append(f"random sample of {n} of {space}")
    note = estimate(points_at(spec.factors, kept))
    before = len(rows)
    local_search(spec, rows, run)
    log.append({"rung": "estimate", "entered": len(kept), "evaluated": len(rows), "local_search": len(rows) - before})
    parts.append(f"estimate {len(kept)}" + (f" ({note[2:]})" if note else "")
                 + (f" + {len(rows) - before} by the local search" if len(rows) > before else ""))
    return " -> ".join(parts)


def bound_rung(spec: PlanSpec, n: int, bound_of, inputs_of, constraints: Sequence[str]
                ) -> tuple[list[int], int, int, int]:
    """The flat indices of the `n` candidates with the best class bounds among those the constraints on
    inputs admit (candidates of classes without a bound first, those that do not load last; ties broken
    by a seeded random order); the number of classes, how many had no bound, and how many candidates the
    constraints excluded (the excluded count covers the classes examined only)."""
    fs = spec.factors
    free = [i for i, f in enumerate(fs) if all(is_compute_free(k) for k in f.keys)]
    fixed = [i for i, f in enumerate(fs) if i not in free]
    sizes = [len(f.steps) for f in fs]
    n_free = math.prod(sizes[i] for i in free)
    n_classes = math.prod(sizes[i] for i in fixed)
    free_keys = {k for i in free for k in fs[i].keys}
    pre_names = {a.key for a in spec.axes} | set(INPUT_NAMES)
    terms = [e for e in _conjuncts(tuple(constraints)) if e.names <= pre_names]
    class_terms = [e for e in terms if not e.names & free_keys]
    member_terms = [e for e in terms if e.names & free_keys]
    scores: list[tuple[float, int]] = []
    unbounded = excluded = 0
    known: dict[int, dict] = {}
    for c in range(n_classes):
        point = points_at(fs, [_compose(c, 0, fixed, free, sizes)])[0]
        b = bound_score(bound_of(point), spec)
        got = inputs_of(point)
        if got is not None:
            known[c] = {**point.as_dict(), **got}
            if not all(e.evaluate(known[c]) for e in class_terms):
                excluded += n_free
                continue
        unbounded += b is None and got is not None
        scores.append((math.inf if got is None else -math.inf if b is None else b[0], c))
    ties = tie_order([c for _, c in scores], spec.seed)
    order = best(scores, len(scores), ties)
    by_class = dict((c, sc) for sc, c in scores)
    kept: list[int] = []
    rng = random.Random(spec.seed)
    i = 0
    while i < len(order) and len(kept) < n:
        j = i  # a group of classes with equal scores: all of it, or a seeded random part of it
        while j < len(order) and by_class[order[j]] == by_class[order[i]]:
            j += 1
        members = [(c, m) for c in order[i:j] for m in range(n_free)]
        if member_terms:
            admitted = [(c, m) for c, m in members if c not in known or all(
                e.evaluate({**known[c], **points_at(fs, [_compose(c, m, fixed, free, sizes)])[0].as_dict()})
                for e in member_terms)]
            excluded += len(members) - len(admitted)
            members = admitted
        need = n - len(kept)
        picked = members if len(members) <= need else [members[k] for k in sorted(rng.sample(range(len(members)), need))]
        kept += [_compose(c, m, fixed, free, sizes) for c, m in picked]
        i = j
    return sorted(kept), n_classes, unbounded, excluded


def _compose(cls: int, member: int, fixed: list[int], free: list[int], sizes: list[int]) -> int:
    """The flat index of the candidate with class index `cls` (mixed radix over the compute axes) and member
    index `member` (over the compute-free axes), the last axis varying fastest."""
    digits = [0] * len(sizes)
    for group, value in ((fixed, cls), (free, member)):
        for i in reversed(group):
            value, digits[i] = divmod(value, sizes[i])
    flat = 0
    for i, d in enumerate(digits):
        flat = flat * sizes[i] + d
    return flat


def simulation_rungs(feasible: list[dict], rungs: Sequence[Rung], job: Job, spec: PlanSpec, jobs: int,
                     log: list[dict[str, Any]], confirm) -> tuple[list[dict], str]:
    """The simulation rungs: each takes the best ceil(n / eta) feasible candidates of the rung before it
    (at most its cap), simulates them and ranks them on the simulated figures. Returns the ranking (the
    last rung's candidates first, then each earlier rung's others, best rung first) and header text."""
    caps = rung_caps(rungs, spec.max_points, spec.confirm, spec.eta)
    est_at = next(i for i, r in enumerate(rungs) if r.kind == "estimate")
    entered = log[-1]["entered"]
    levels: list[list[dict]] = [feasible]
    parts = []
    for i in range(est_at + 1, len(rungs)):
        n = entering(entered, spec.eta, caps[i])
        pool = levels[-1]
        chosen = pool[:n]
        if not chosen:
            break
        simulated = confirm(chosen, job, spec, jobs, rungs[i])
        ok = [r for r in simulated if r.get("rung") == rungs[i].name]
        ok_sorted = [r for r in ok if drop_reason(r, spec) is None] + [r for r in ok if drop_reason(r, spec) is not None]
        failed = [r for r in simulated if r.get("rung") != rungs[i].name]
        levels[-1] = pool[n:]
        levels.append(ok_sorted + failed)
        log.append({"rung": rungs[i].name, "entered": len(chosen), "evaluated": len(ok)})
        parts.append(f"{rungs[i].name} {len(chosen)}")
        entered = len(chosen)
    ranked = [r for level in reversed(levels) for r in level]
    return ranked, (" -> " + " -> ".join(parts)) if parts else ""
