"""Sweeps from files and the command line: the `sweep:` block of a scenario file, `--axis` texts, and
the loader that resolves one point (base data + --set overrides + the point's axis values).

A sweep block (only `simdist sweep` reads it; `run` refuses it as an unknown key):
    sweep:
      axes:
        communication.strategy: [ring, hierarchical, ps]
        cluster.nodes.0.count: "geom(2, 32, 5)"
      zip: [[keyA, keyB]]            # optional: axes that advance together
      constraints: ["gpus <= 1024"]   # optional
A plan block (`simdist plan`) has the same axes, zip and constraints, and the plan's options (_PLAN_KEYS).
Everything is checked here, before a point runs (io/sweep_axes.py, io/plan_rules.py).
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Sequence

import yaml

from simdist.errors import Issue, ScenarioError
from simdist.io.issues import unknown_key
from simdist.io.layout_rules import invalid_reasons
from simdist.io.load import load_data
from simdist.io.overrides import apply_overrides, set_path
from simdist.io.yaml_source import read_file
from simdist.io.plan_rules import check_constraints, check_eta, check_plan, parse_rungs
from simdist.io.sweep_axes import check_space, make_axis, parse_axis
from simdist.planner.axes import Axis
from simdist.planner.objective import Objective, PlanSpec, SearchMethod
from simdist.planner.rows import INPUT_NAMES, RESULT_COLUMNS
from simdist.planner.store import read_header, read_signature, signature_path
from simdist.planner.sweep import SweepSpec, columns_for, journal_path, signature
from simdist.units import parse_duration

_BLOCK_KEYS = ("axes", "zip", "constraints")


def parse_scalar(text: str) -> Any:
    """One axis value from the command line, read as YAML ('16' -> 16, 'true' -> True, '25 MB' stays text)."""
    try:
        return yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError:
        raise ScenarioError(Issue("--axis", f"value {text!r} is not valid YAML")) from None


def read_sweep_file(path: str | Path, block_key: str = "sweep") -> tuple[dict, dict, Path, str]:
    """(scenario data without its sweep and plan blocks, the `block_key` block or {}, its folder, its name)."""
    p = Path(path).expanduser()
    source = read_file(p)
    if source.issues:
        raise ScenarioError(list(source.issues))
    data = source.data
    if not isinstance(data, dict):
        raise ScenarioError(Issue("", f"{p}: expected a mapping of scenario keys at the top level"))
    data = dict(data)
    blocks = {k: data.pop(k, None) or {} for k in ("sweep", "plan")}
    block = blocks[block_key]
    if not isinstance(block, dict):
        raise ScenarioError.bad_value(block_key, block, "a mapping (axes, constraints, ...)")
    return data, block, p.resolve().parent, p.stem


def sweep_spec(block: dict, axis_texts: Sequence[str] = (), zip_texts: Sequence[str] = (),
               constraints: Sequence[str] = (), block_key: str = "sweep") -> SweepSpec:
    """The file's sweep block merged with --axis / --zip / --constraint (command-line axes replace the
    block's axes of the same key and come after the others)."""
    unknown = sorted(set(block) - set(_BLOCK_KEYS))
    if unknown:
        raise ScenarioError(Issue(f"sweep.{unknown[0]}", f"unknown key; expected one of {', '.join(_BLOCK_KEYS)}"))
    axes_block = block.get("axes") or {}
    if not isinstance(axes_block, dict):
        raise ScenarioError.bad_value("sweep.axes", axes_block, "a mapping of scenario key -> list of values")
    cli = [parse_axis(t, parse_scalar) for t in axis_texts]
    cli_keys = {a.key for a in cli}
    axes: list[Axis] = [make_axis(str(k), v) for k, v in axes_block.items() if str(k) not in cli_keys] + cli
    if not axes:
        raise ScenarioError(Issue("--axis", f"the {block_key} has no axes; give --axis KEY=V1,V2 or a {block_key}.axes "
                                            "block"))
    typos = [issue for issue in (unknown_key(a.key) for a in axes) if issue is not None]
    if typos:  # a key no point can have: refuse it now rather than run every point into the same error
        raise ScenarioError(typos)
    zipped = _zipped(block.get("zip"), zip_texts, block_key)
    check_space(axes, zipped, block_key)
    texts = [str(c) for c in _list(block.get("constraints"), f"{block_key}.constraints")] + list(constraints)
    if block_key == "sweep":
        check_constraints(texts, [a.key for a in axes] + list(INPUT_NAMES) + list(RESULT_COLUMNS))
    return SweepSpec(tuple(axes), tuple(zipped), tuple(texts))


def _zipped(block_zip: Any, zip_texts: Sequence[str], block_key: str) -> list[tuple[str, ...]]:
    """Zipped groups from the block (a list of lists of keys) and from --zip texts ('keyA,keyB')."""
    groups = []
    for z in _list(block_zip, f"{block_key}.zip"):
        if not isinstance(z, list) or len(z) < 2:
            raise ScenarioError.bad_value(f"{block_key}.zip", z, "a list of two or more axis keys, e.g. "
                                                                 "[cluster.nodes.0.gpu, cluster.nodes.0.intra_node]")
        groups.append(tuple(str(k) for k in z))
    for text in zip_texts:
        keys = tuple(k.strip() for k in text.split(",") if k.strip())
        if len(keys) < 2:
            raise ScenarioError.bad_value("--zip", text, "two or more axis keys separated by commas")
        groups.append(keys)
    return groups


_PLAN_KEYS = ("axes", "zip", "constraints", "objective", "samples", "tokens", "budget_per_hour", "max_gpus", "deadline",
              "top", "confirm", "max_points", "search", "eta", "rungs", "prune", "seed")


def plan_spec(block: dict, axis_texts: Sequence[str] = (), options: dict | None = None,
              zip_texts: Sequence[str] = ()) -> PlanSpec:
    """A plan's space and ranking from the file's plan block, with command-line options taking precedence,
    checked (check_goodput, which needs the scenario, is the one rule left to the caller).

    budget_per_hour (USD), max_gpus and deadline (a duration, with --samples/--tokens) become constraints.
    """
    unknown = sorted(set(block) - set(_PLAN_KEYS))
    if unknown:
        raise ScenarioError(Issue(f"plan.{unknown[0]}", f"unknown key; expected one of {', '.join(_PLAN_KEYS)}"))
    given = {k: v for k, v in (options or {}).items() if v is not None and v != ()}
    opts = {k: v for k, v in {**block, **given}.items() if v is not None}
    space = sweep_spec({"axes": block.get("axes") or {}, "zip": block.get("zip")}, axis_texts, zip_texts,
                       block_key="plan")
    constraints = [str(c) for c in _list(block.get("constraints"), "plan.constraints")]
    constraints += list((options or {}).get("constraints") or ())
    if "budget_per_hour" in opts:
        constraints.append(f"cost_per_hour <= {_positive(opts['budget_per_hour'], 'budget_per_hour')!r}")
    if "max_gpus" in opts:
        constraints.append(f"gpus <= {int(_positive(opts['max_gpus'], 'max_gpus'))}")
    if "deadline" in opts:
        constraints.append(f"time_to_train_s <= {parse_duration(opts['deadline'], 'plan.deadline')!r}")
    try:
        objective = Objective(opts.get("objective", "throughput"))
    except ValueError:
        raise ScenarioError.bad_value("plan.objective", opts.get("objective"),
                                      f"one of {', '.join(o.value for o in Objective)}") from None
    kw = {k: int(_positive(opts[k], k)) for k in ("top", "confirm", "max_points", "seed") if k in opts}
    budget = {k: float(_positive(opts[k], k)) for k in ("samples", "tokens") if k in opts}
    kw.update(_search_options(opts))
    known = [a.key for a in space.axes] + list(INPUT_NAMES) + list(RESULT_COLUMNS) + ["time_to_train_s"]
    check_constraints(constraints, known)
    spec = PlanSpec(axes=space.axes, zipped=space.zipped, objective=objective, constraints=tuple(constraints),
                    **budget, **kw)
    check_plan(spec)
    return spec


def check_goodput(spec: PlanSpec, base: dict, overrides: Sequence[str] = (), base_dir: str = ".",
                  name: str = "scenario") -> None:
    """`--objective goodput` needs failures to count useful time under: refused when the scenario has none."""
    if spec.objective != Objective.GOODPUT:
        return
    if any(a.key == "failures" or a.key.startswith("failures.") for a in spec.axes):
        return
    try:
        has = load_point(base, tuple(overrides), {}, base_dir, name).failures is not None
    except ScenarioError:  # the base alone may not load (an axis fills it in): judge by its data
        has = isinstance(base, dict) and base.get("failures") is not None
    if not has:
        raise ScenarioError(Issue("--objective", "goodput needs a failures section in the scenario (with "
                                                 "run.duration); this one has none"))


def _search_options(opts: dict) -> dict:
    """plan.search (auto | exhaustive | halving | sample), plan.eta, plan.rungs (a list or a comma-separated
    text) and plan.prune (a boolean), checked (planner/halving.py says what they do); plan.seed is read
    with the counts."""
    out: dict = {}
    if "search" in opts:
        try:
            out["search"] = SearchMethod(opts["search"])
        except ValueError:
            raise ScenarioError.bad_value("plan.search", opts["search"],
                                          f"one of {', '.join(m.value for m in SearchMethod)}") from None
    if "eta" in opts:
        check_eta(opts["eta"], "plan.eta")
        out["eta"] = opts["eta"]
    if "rungs" in opts:
        out["rungs"] = tuple(r.name for r in parse_rungs(opts["rungs"], "plan.rungs"))
    if "prune" in opts:
        if not isinstance(opts["prune"], bool):
            raise ScenarioError.bad_value("plan.prune", opts["prune"], "true or false")
        out["prune"] = opts["prune"]
    return out


def _positive(value: Any, key: str) -> float:
    if isinstance(value, str):  # YAML 1.1 reads 20.0e9 (no exponent sign) as text
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ScenarioError.bad_value(f"plan.{key}", value, "a number >= 0")
    return value


def _list(value: Any, key: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ScenarioError.bad_value(key, value, "a list")
    return value


def check_out_file(out: str, fmt: str, spec: SweepSpec, base: dict, overrides: Sequence[str] = (),
                   fidelity: str = "") -> None:
    """Refuse an --out file that another sweep wrote (other axes, zipped groups, constraints, base scenario,
    --set overrides or fidelity, or columns), or whose record of what wrote it is missing: a resumed
    sweep only appends to a file of the same sweep (planner/store.py)."""
    path = Path(journal_path(out, fmt))
    if not path.exists() or path.stat().st_size == 0:
        return
    theirs, mine = read_signature(path), signature(spec, base, overrides, fidelity)
    if theirs is None:
        raise ScenarioError(Issue("--out", f"{path} exists but {signature_path(path).name} (what sweep wrote it) "
                                           "is missing or unreadable; write to another file or delete it"))
    if theirs != mine:
        diff = sorted(k for k in set(theirs) | set(mine) if theirs.get(k) != mine.get(k))
        what = {"axes": "axes", "zip": "zipped axes", "constraints": "constraints", "base": "base scenario",
                "fidelity": "fidelity", "overrides": "--set overrides"}
        raise ScenarioError(Issue("--out", f"{path} holds a different sweep (its "
                                           f"{', '.join(what.get(k, k) for k in diff)} differ: it has axes "
                                           f"{_axes_text(theirs)}, this sweep {_axes_text(mine)}); "
                                           "write to another --out or delete the file to start over"))
    header, columns = read_header(path), columns_for(spec)
    if header != columns:
        raise ScenarioError(Issue("--out", f"{path} has columns {list(header)}, not this sweep's; write to another "
                                           "--out or delete it"))


def _axes_text(sig: dict[str, Any]) -> str:
    axes = sig.get("axes") or []
    return "[" + ", ".join(f"{k}={len(v)} values" for k, v in axes) + "]"


class PointLoader:
    """Loads one point's Scenario: the base data, the --set overrides, then each axis value at its key. It also
    knows the same rules over a whole plan space of layouts at once (io/layout_rules.py), which the planner's
    layout search uses instead of loading every candidate (planner/layout_search.py)."""

    def __call__(self, base: dict, overrides: Sequence[str], values: dict, base_dir: str, name: str):
        data = apply_overrides(base, list(overrides))  # a deep copy: the base is never changed
        for key, value in values.items():
            set_path(data, key.split("."), copy.deepcopy(value))
        return load_data(data, (), base_dir, name)

    @staticmethod
    def invalid_layouts(grid):
        """Per candidate of a planner.layout_space.LayoutGrid, the first rule the loader refuses it by ('' none)."""
        return invalid_reasons(grid)


load_point = PointLoader()
