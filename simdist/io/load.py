"""Load a scenario: read YAML, apply --set overrides, validate the strict schema, resolve to a Scenario.

`check_file` returns every issue at once, in file order; `load_scenario` raises one ScenarioError
carrying all of them. Both end with io.rules (what the engine runs), so a file `check` passes is one
`run` does not refuse. Nothing but ScenarioError escapes for bad input.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from pydantic import ValidationError

from simdist.errors import Issue, ScenarioError
from simdist.io.issues import from_validation_error
from simdist.io.overrides import apply_overrides
from simdist.io.resolve import collect
from simdist.io.resolve_cluster import hardware_catalog
from simdist.io.resolve_workload import model_catalog
from simdist.io.rules import rules
from simdist.io.schema import ScenarioModel
from simdist.io.yaml_source import Source, read_file
from simdist.scenario import Scenario

_TOP_KEYS = ", ".join(ScenarioModel.model_fields)


def catalog_context() -> dict[str, list[str]]:
    """The catalog keys the schema checks names against (passed as pydantic's validation context)."""
    hw = hardware_catalog()
    return {
        "gpu_keys": list(hw.gpus()),
        "link_keys": list(hw.links()),
        "intra_node_keys": list(hw.intra_nodes()),
        "model_keys": list(model_catalog().model_keys()),
    }


def _in_file_order(issues: list[Issue], source: Source) -> list[Issue]:
    """Issues sorted by their line in the file, each reported once (two checks may find the same problem)."""
    return sorted(dict.fromkeys(issues), key=lambda i: source.line_of(i.path))


def _check(source: Source, overrides: Sequence[str], base_dir: Path, name: str) -> tuple[Scenario | None, list[Issue]]:
    issues = list(source.issues)
    data: Any = source.data
    if data is None:
        data = {}
        if not overrides:
            return None, [Issue("", f"the scenario is empty; expected a mapping with keys {_TOP_KEYS}")]
    if not isinstance(data, dict):
        return None, [Issue("", f"got a {type(data).__name__} at the top level; expected a mapping with keys {_TOP_KEYS}")]
    try:
        data = apply_overrides(data, overrides)
    except ScenarioError as err:
        return None, issues + err.issues
    try:
        model = ScenarioModel.model_validate(data, context=catalog_context())
    except ValidationError as err:
        issues += from_validation_error(err)
        return None, _in_file_order(issues, source)
    if issues:
        return None, _in_file_order(issues, source)
    scenario, found = collect(model, base_dir, name)
    if scenario is not None:  # what the engine runs (io/rules.py): refused here, never deep in a run
        found = rules(scenario)
        if found:
            return None, _in_file_order(found, source)
    return scenario, _in_file_order(found, source)


def check_data(data: Any, overrides: Sequence[str] = (), base_dir: str | Path = ".",
               name: str = "scenario") -> list[Issue]:
    """Every issue in already-parsed scenario data (e.g. from a sweep); [] when it is valid."""
    return _check(Source(data), overrides, Path(base_dir), name)[1]


def load_data(data: Any, overrides: Sequence[str] = (), base_dir: str | Path = ".", name: str = "scenario") -> Scenario:
    """Scenario from already-parsed data; relative paths resolve against `base_dir`."""
    scenario, issues = _check(Source(data), overrides, Path(base_dir), name)
    if scenario is None:
        raise ScenarioError(issues or [Issue("", "the scenario could not be resolved")])
    return scenario


def _from_file(path: str | Path, overrides: Sequence[str]) -> tuple[Scenario | None, list[Issue]]:
    p = Path(path).expanduser()
    source = read_file(p)
    return _check(source, overrides, p.resolve().parent, p.stem)


def check_file(path: str | Path, overrides: Sequence[str] = ()) -> list[Issue]:
    """Every issue in a scenario file, in file order; [] when it loads."""
    return checked_file(path, overrides)[1]


def checked_file(path: str | Path, overrides: Sequence[str] = ()) -> tuple[Scenario | None, list[Issue]]:
    """The loaded scenario and no issues, or None and every issue in file order (what `simdist check` reports)."""
    try:
        return _from_file(path, overrides)
    except ScenarioError as err:
        return None, list(err.issues)


def load_scenario(path: str | Path, overrides: Sequence[str] = ()) -> Scenario:
    """Read, override, validate and resolve a scenario file; raises ScenarioError naming every problem."""
    scenario, issues = _from_file(path, overrides)
    if scenario is None:
        raise ScenarioError(issues or [Issue("", "the scenario could not be resolved")])
    return scenario
