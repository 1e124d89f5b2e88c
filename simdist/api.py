"""The public Python API: load a scenario (file or dict, with overrides), run it, read the result.

`load` goes through the same strict schema and `--set` override rules as the CLI; `simulate` and
`estimate` wrap the engine's one entry point; `Result` carries the fields of the JSON result, and
`to_dict()` is the very object that `simdist run --json` prints. Heavy libraries (yaml, pydantic,
pandas) are imported only when a function needs them, so `import simdist` stays fast.
"""
from __future__ import annotations

import json
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence, Union

import simdist.compare as breakeven_analysis
import simdist.engine.simulation as simulation
import simdist.io.compare_input as compare_input
import simdist.io.load as scenario_load
import simdist.io.sweep_load as sweep_load
import simdist.planner.store as row_store
import simdist.planner.sweep as planner_sweep
import simdist.results.writers as writers
import simdist.scenario as scenario_types
import simdist.validation.published.runner as published_runner
from simdist.io.api_input import check_fidelity, checked_scenario, override_strings, source_error
from simdist.results.records import RECORD_KEYS, RunResult
from simdist.units import parse_bandwidth

if TYPE_CHECKING:  # pragma: no cover
    from simdist.scenario import Scenario

ScenarioSource = Union["Scenario", str, Path, Mapping[str, Any]]
Overrides = Union[Mapping[str, Any], Sequence[str], str, None]

_RUN_FIELDS = tuple(f.name for f in dataclass_fields(RunResult) if f.name not in RECORD_KEYS)
TABLES = ("summary", "collectives", "links", "iterations", "timeline")


def _records(run: RunResult) -> list[str]:
    """The typed records this run has (strategy, parallelism, node groups): read as the JSON has them."""
    return [k for k in RECORD_KEYS if getattr(run, k) is not None]


def load(source: ScenarioSource, overrides: Overrides = None, *, base_dir: str | Path | None = None) -> "Scenario":
    """A validated, resolved Scenario from a YAML file path or a dict, with optional overrides.

    A dict goes through the same strict schema as a file (unknown keys, bare numbers for quantities
    and unknown catalog names are ScenarioErrors naming the key). Relative paths inside a dict
    (calibration, custom topologies) resolve against `base_dir`, default the working directory.
    `overrides` are the CLI's `--set`: {"communication.strategy": "ps"} or ["run.iterations=5"].
    An already-loaded Scenario (or one changed in code) is returned once it passes the run rules (it cannot take
    overrides: load the file again).
    """
    sets = override_strings(overrides)
    if isinstance(source, scenario_types.Scenario):  # built or changed in code: the same rules as a file
        return checked_scenario(source, sets)
    if isinstance(source, Mapping):
        name = source.get("name") if isinstance(source.get("name"), str) else "scenario"
        return scenario_load.load_data(dict(source), sets, base_dir=base_dir or ".", name=name)
    if isinstance(source, (str, Path)):
        return scenario_load.load_scenario(source, sets)
    raise source_error(source)


def simulate(scenario: ScenarioSource, *, fidelity: str | None = None) -> "Result":
    """Run a scenario, as `simdist run` does: at `run.fidelity` (default: discrete events) unless `fidelity` is given.

    `scenario` may be a Scenario from `load`, or a path or dict that is loaded first.
    """
    check_fidelity(fidelity)
    spec = load(scenario)
    return Result(simulation.simulate(spec, fidelity=fidelity or ""), spec)


def estimate(scenario: ScenarioSource) -> "Result":
    """The analytical (closed-form) result, as `simdist estimate` gives it: fast, no events."""
    return simulate(scenario, fidelity="estimate")


def breakeven(scenario: ScenarioSource, bandwidths: Sequence[str | float],
              methods: str | Sequence[str] = "fp16,int8,topk:0.01,powersgd:4", *, fidelity: str = "estimate"):
    """At which NIC bandwidth each codec stops paying for itself, as `simdist compare` finds it.

    `bandwidths` are texts like "25 Gb/s" (or B/s as numbers); `methods` as `compare --methods`
    ('fp16,int8,topk:0.01,powersgd:4' or a list of such tokens). Returns a compare.BreakevenTable
    (`iteration_time_s`, `speedup(m)`, `breakeven_Bps`, `status`, `to_dict()`); convergence is not
    part of it: a codec's `training.convergence_factor` multiplies its time to target, not its iteration.
    """
    bws = [b if isinstance(b, (int, float)) else parse_bandwidth(str(b), f"bandwidths[{i}]")
           for i, b in enumerate(bandwidths)]
    specs = compare_input.parse_methods(methods if isinstance(methods, str) else ",".join(methods))
    spec = load(scenario)
    compare_input.check_breakeven(spec, bws, specs)
    return breakeven_analysis.breakeven(spec, bws, specs, fidelity=fidelity)


def _flatten(obj: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{name}."))
        elif not isinstance(value, list):
            out[name] = value
    return out


def _pandas():
    try:
        import pandas
    except ImportError:
        raise ImportError("Result.to_frame() needs pandas, which is not installed: pip install pandas "
                          "(or use Result.to_dict(), which needs nothing)") from None
    return pandas


class Result:
    """One run's result: every field of the JSON result as an attribute, plus tables and the inputs.

    `result.iteration_time_s`, `result.breakdown_s.compute`, `result.links`... read the RunResult
    (records as dataclasses); keys that a strategy adds to the JSON (`result.to_dict()` keys beyond
    the fixed ones) are attributes too. `result.scenario` is the scenario's name, as in the JSON;
    `result.scenario_spec` is the resolved Scenario that produced it and `result.run` the RunResult.
    """

    __slots__ = ("run", "scenario_spec")

    def __init__(self, run: RunResult, scenario_spec: "Scenario") -> None:
        self.run = run
        self.scenario_spec = scenario_spec

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in Result.__slots__:
            raise AttributeError(name)
        run = object.__getattribute__(self, "run")
        if name in _RUN_FIELDS:
            return getattr(run, name)
        if name in run.extra or name in _records(run):  # as the JSON has it (plain Python numbers, lists)
            return self.to_dict()[name]
        raise AttributeError(f"the result has no field {name!r}; fields: {', '.join(self.keys())}")

    def __dir__(self) -> Iterable[str]:
        return sorted(set(super().__dir__()) | set(_RUN_FIELDS) | set(self.run.extra) | set(_records(self.run)))

    def __repr__(self) -> str:
        t = self.run.iteration_time_s
        return (f"<simdist.Result {self.run.scenario!r}: {self.run.gpus} GPUs, {self.run.fidelity}, "
                + (f"iteration {t * 1e3:.4g} ms>" if t is not None else "benchmark>"))

    def keys(self) -> list[str]:
        """The top-level keys of the JSON result."""
        return list(self.run.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """The JSON result object, identical to what `simdist run FILE --json` prints (plain Python types)."""
        return json.loads(self.to_json())

    def to_json(self) -> str:
        """The JSON text `simdist run FILE --json` prints (deterministic, byte for byte)."""
        return writers.result_json(self.run)

    def write(self, out_dir: str | Path) -> list[Path]:
        """Write result.json, iterations.csv and trace.json into `out_dir`, as `--out DIR` does."""
        return writers.write_result_dir(self.run, out_dir)

    def to_frame(self, table: str = "summary"):
        """A pandas DataFrame of one table of the result.

        summary: one row, the JSON's scalar fields with nested keys dotted ('breakdown_s.compute');
        collectives: the nccl-tests rows of a benchmark; links: link utilisation; iterations: the
        time of each iteration; timeline: the step records (track, name, start_s, end_s, iteration).
        """
        if table not in TABLES:
            raise ValueError(f"table {table!r}: expected one of {', '.join(TABLES)}")
        pd = _pandas()
        data = self.to_dict()
        if table == "summary":
            return pd.DataFrame([_flatten(data)])
        if table == "collectives":
            if data["collectives"] is None:
                raise ValueError("this result has no collectives table (only a benchmark workload has one)")
            return pd.DataFrame(data["collectives"], columns=["op", "size_bytes", "time_s", "algbw_GBps",
                                                              "busbw_GBps", "algorithm"])
        if table == "links":
            return pd.DataFrame(data["links"], columns=["link", "utilization"])
        if table == "iterations":
            return pd.DataFrame({"iteration": range(len(self.run.iterations)),
                                 "time_s": [float(t) for t in self.run.iterations]})
        return pd.DataFrame([(r.track, r.name, r.start_s, r.end_s, r.iteration) for r in self.run.records],
                            columns=["track", "name", "start_s", "end_s", "iteration"])


class SweepTable:
    """A finished sweep: `columns`, `rows` (one dict per point, numbers and booleans typed), the counts
    (`points`, `ran`, `resumed`, `pruned`, `by_status`), the file it lives in, and `to_frame()`."""

    def __init__(self, outcome, path: str) -> None:
        self.columns = list(outcome.columns)
        self.rows = row_store.typed_rows(outcome.rows, self.columns)
        self.points, self.ran, self.resumed, self.pruned = outcome.points, outcome.ran, outcome.resumed, outcome.pruned
        self.by_status = dict(outcome.by_status)
        self.path = path

    def to_frame(self):
        """The table as a pandas DataFrame, one row per point."""
        return _pandas().DataFrame(self.rows, columns=self.columns)

    def __len__(self) -> int:
        return len(self.rows)

    def __repr__(self) -> str:
        return f"SweepTable({self.points} points, {self.by_status}, file {self.path!r})"


def sweep(scenario: str | Path | Mapping[str, Any], axes: Mapping[str, Any] | None = None, *, out: str | Path = "sweep.csv",
          zip: Sequence[Sequence[str]] = (), constraints: Sequence[str] = (), overrides: Overrides = None,
          fidelity: str | None = None, jobs: int = 0, executor: str = "local", address: str | None = None,
          fmt: str = "csv") -> SweepTable:
    """Run a scenario over swept keys, as `simdist sweep` does; returns the whole table.

    `axes` maps a dotted key to a list of values or a 'range(...)'/'geom(...)' text, e.g.
    {"communication.strategy": ["ring", "ps"], "cluster.nodes.0.count": "geom(2, 32, 5)"}; a file's
    `sweep:` block adds its axes, zipped groups and constraints. `out` is resumable: rerunning the same
    sweep into it runs only the missing points.
    """
    if isinstance(scenario, Mapping):
        base = dict(scenario)
        block = base.pop("sweep", None) or {}
        base.pop("plan", None)
        base_dir, name = Path("."), base.get("name") if isinstance(base.get("name"), str) else "scenario"
    else:
        base, block, base_dir, name = sweep_load.read_sweep_file(scenario)
    merged = dict(block, axes={**(block.get("axes") or {}), **dict(axes or {})})
    merged["zip"] = list(block.get("zip") or []) + [list(z) for z in zip]
    merged["constraints"] = list(block.get("constraints") or []) + list(constraints)
    spec = sweep_load.sweep_spec(merged)
    sweep_load.check_out_file(str(out), fmt, spec, base, override_strings(overrides), fidelity or "")
    outcome = planner_sweep.run_sweep(spec, base, sweep_load.load_point, str(out), base_dir=str(base_dir), name=name,
                                      overrides=override_strings(overrides), fidelity=fidelity or "", jobs=jobs,
                                      executor=executor, address=address, fmt=fmt)
    return SweepTable(outcome, str(out))


class PublishedReport:
    """The published-benchmark suite's report, as `simdist validate --published --json` prints it.

    Its keys are attributes (`mape`, `out_of_sample_mape`, `max_error`, `ranking_ok`, `within_25pct`,
    `cases`, `by_category`, `by_metric`, `ranking`, `fitting_subset`, `failed`, `unexplained`, `anchored`,
    `scaling_vs_perfect`); `to_dict()`
    is the JSON object and `to_frame(table)` a pandas DataFrame of the cases or of the aggregates.
    """

    __slots__ = ("report",)
    TABLES = ("cases", "category", "metric")

    def __init__(self, report: Mapping[str, Any]) -> None:
        self.report = dict(report)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in PublishedReport.__slots__:
            raise AttributeError(name)
        report = object.__getattribute__(self, "report")
        if name in report:
            return report[name]
        raise AttributeError(f"the published report has no key {name!r}; keys: {', '.join(report)}")

    def __dir__(self) -> Iterable[str]:
        return sorted(set(super().__dir__()) | set(self.report))

    def __repr__(self) -> str:
        mape = self.report.get("mape")
        return (f"<simdist PublishedReport: {len(self.report['cases'])} cases, "
                + (f"MAPE {mape:.1%}>" if isinstance(mape, (int, float)) else "no MAPE>"))

    def to_dict(self) -> dict[str, Any]:
        """The validate object (plain Python types), identical in content to `validate --published --json`."""
        return json.loads(json.dumps(self.report))

    def to_frame(self, table: str = "cases"):
        """cases: one row per case (name, metric, category, measured, predicted, ratio = measured/predicted,
        error, group, source, failure); category / metric: the aggregates per category or metric
        (cases, mape, max_error, within_25pct, failed)."""
        if table not in self.TABLES:
            raise ValueError(f"table {table!r}: expected one of {', '.join(self.TABLES)}")
        pd = _pandas()
        if table == "cases":
            cols = ["name", "metric", "category", "measured", "predicted", "ratio", "error", "group", "source",
                    "failure"]
            return pd.DataFrame([{k: c.get(k) for k in cols} for c in self.report["cases"]], columns=cols)
        agg = self.report[f"by_{table}"]
        cols = ["cases", "mape", "max_error", "within_25pct", "failed"]
        frame = pd.DataFrame([{table: k, **{c: v.get(c) for c in cols}} for k, v in agg.items()],
                             columns=[table, *cols])
        return frame.set_index(table)


def validate_published(cases_file: str | Path | None = None,
                       categories: Sequence[str] | None = None) -> PublishedReport:
    """Predict the published-benchmark suite uncalibrated and compare with the measured figures, as
    `simdist validate --published [--category NAME ...]` does (nothing is run for real). `cases_file` defaults to
    the shipped validation/published/cases.yaml; `categories` keeps only those categories' cases (the whole suite
    takes several CPU-minutes, most of it in the LLM tables' largest layouts); an unknown one is a ValueError."""
    return PublishedReport(published_runner.run_suite(cases_file or published_runner.CASES_FILE,
                                                      categories=categories))
