"""Errors users see: a bad scenario (exit 2) and a legal but unrunnable one (exit 3)."""
from __future__ import annotations

from dataclasses import dataclass


class SimdistError(Exception):
    """Base of every error simdist reports to a user without a traceback."""

    exit_code = 1


@dataclass(frozen=True)
class Issue:
    """One problem in a scenario: where (dotted YAML path), what was given, what was expected."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ScenarioError(SimdistError):
    """The scenario is malformed; carries every issue found, each naming its YAML path."""

    exit_code = 2

    def __init__(self, issues: "list[Issue] | Issue | str", path: str = "") -> None:
        if isinstance(issues, str):
            issues = [Issue(path, issues)]
        elif isinstance(issues, Issue):
            issues = [issues]
        self.issues: list[Issue] = list(issues)
        super().__init__("; ".join(str(i) for i in self.issues))

    @classmethod
    def bad_value(cls, path: str, value: object, expected: str) -> "ScenarioError":
        """The common shape: `path: got 'value'; expected ...`."""
        return cls(Issue(path, f"got {value!r}; expected {expected}"))


class InfeasibleError(SimdistError):
    """The scenario is well formed but cannot run (e.g. does not fit in GPU memory)."""

    exit_code = 3
