"""What the Python API (simdist/api.py) takes from a caller, checked here like a file: overrides as `--set`
strings, the scenario source, the fidelity, and a Scenario built in code, which passes io.rules as a loaded
one does (so `simdist.simulate(scenario)` refuses what `simdist run` refuses)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from simdist.errors import Issue, ScenarioError
from simdist.io.rules import rules
from simdist.scenario import Fidelity

if TYPE_CHECKING:  # pragma: no cover - the API imports this module before any scenario is loaded
    from simdist.scenario import Scenario


def yaml_value(value: Any, key: str) -> str:
    """`value` as the YAML text that `--set key=TEXT` reads back as the same value."""
    import yaml

    if isinstance(value, float) and not math.isfinite(value):
        raise ScenarioError(Issue(key, f"got {value!r}; expected a finite number"))
    try:
        text = yaml.safe_dump(value, default_flow_style=True, width=float("inf"), allow_unicode=True)
    except yaml.YAMLError as err:
        raise ScenarioError(Issue(key, f"got {value!r} ({type(value).__name__}); expected a plain value "
                                       f"(text, number, true/false, list or mapping): {err}")) from None
    return text.removesuffix("\n").removesuffix("\n...").strip()


def override_strings(overrides: "Mapping[str, Any] | Sequence[str] | str | None") -> list[str]:
    """Overrides as the CLI's `key=value` strings: a mapping {dotted.key: value}, a list of strings or one string."""
    if overrides is None:
        return []
    if isinstance(overrides, str):
        return [overrides]
    if isinstance(overrides, Mapping):
        out = []
        for key, value in overrides.items():
            if not isinstance(key, str) or not key.strip():
                raise ScenarioError(Issue("overrides", f"got key {key!r}; expected a dotted key like "
                                                       "'communication.strategy'"))
            out.append(f"{key}={yaml_value(value, key)}")
        return out
    if isinstance(overrides, Sequence):
        bad = [o for o in overrides if not isinstance(o, str)]
        if bad:
            raise ScenarioError(Issue("overrides", f"got {bad[0]!r}; expected 'dotted.key=value' strings "
                                                   "or a mapping {dotted.key: value}"))
        return list(overrides)
    raise ScenarioError(Issue("overrides", f"got a {type(overrides).__name__}; expected a mapping "
                                           "{dotted.key: value} or a list of 'dotted.key=value' strings"))


def checked_scenario(scenario: "Scenario", overrides: list[str]) -> "Scenario":
    """A Scenario object given to the API: no overrides, and every io.rules issue refused."""
    if overrides:
        raise ScenarioError(Issue("overrides", "a loaded Scenario takes no overrides; pass the file or dict "
                                               "to simdist.load with overrides instead"))
    issues = rules(scenario)
    if issues:
        raise ScenarioError(issues)
    return scenario


def source_error(source: object) -> ScenarioError:
    """The refusal of a scenario source that is none of a path, a mapping or a Scenario."""
    return ScenarioError(Issue("", f"got a {type(source).__name__}; expected a scenario file path, a dict or a "
                                   "Scenario"))


def check_fidelity(fidelity: str | None) -> None:
    """The API's `fidelity` argument: empty (the scenario's run.fidelity) or one of Fidelity's values."""
    if fidelity and fidelity not in {f.value for f in Fidelity}:
        raise ScenarioError(Issue("fidelity", f"got {fidelity!r}; expected one of "
                                              f"{', '.join(f.value for f in Fidelity)}"))
