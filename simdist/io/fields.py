"""Reusable pydantic field types for the scenario schema: quantities with units, counts, fractions.

Quantities arrive as strings with units and leave as SI floats (bytes, bytes/s, seconds), parsed by
simdist.units; every failure becomes a pydantic error carrying a message that names the value and
the expected unit, with a "did you mean" for common spellings such as '100Gbps'.
"""
from __future__ import annotations

from typing import Annotated, Any, Callable

from pydantic import BeforeValidator, Field
from pydantic_core import PydanticCustomError

from simdist.errors import ScenarioError
from simdist.units import parse_bandwidth, parse_duration, parse_flops, parse_size

SIMDIST_ERROR = "simdist"  # pydantic error type whose message is final (already says got/expected)



def closest(word: str, choices: list[str], n: int = 3) -> list[str]:
    """Choices that contain `word` (or that it contains), then difflib's closest, at most `n`."""
    low = word.lower()
    near = [c for c in choices if low and (low in c.lower() or c.lower() in low)]
    import difflib  # only for a message: lazily, not at start-up
    near += [c for c in difflib.get_close_matches(word, choices, n=n, cutoff=0.4) if c not in near]
    return near[:n]


def unknown_key_message(value: str, choices: list[str], what: str) -> str:
    """"got 'a100'; expected a GPU catalog key (see `simdist catalog`); closest: 'a100-sxm4-80gb'"."""
    near = closest(value, choices)
    hint = f"; closest: {', '.join(repr(k) for k in near)}" if near else ""
    return f"got {value!r}; expected a {what} catalog key (see `simdist catalog`){hint}"


def _quantity(parser: Callable[..., float], **kwargs: Any) -> BeforeValidator:
    def check(value: object) -> float:
        try:
            return parser(value, "", **kwargs)
        except ScenarioError as err:
            message = "; ".join(issue.message for issue in err.issues)  # units.py adds any "did you mean"
            raise PydanticCustomError(SIMDIST_ERROR, "{message}", {"message": message}) from None

    return BeforeValidator(check)


def no_bool(value: object) -> object:
    """YAML `true` is not a number: reject bools before pydantic's strict int/float checks."""
    if isinstance(value, bool):
        raise PydanticCustomError(SIMDIST_ERROR, "{message}", {"message": f"got {value!r}; expected a number"})
    return value


Size = Annotated[float, _quantity(parse_size)]  # bytes, > 0
SizeOrZero = Annotated[float, _quantity(parse_size, allow_zero=True)]
Bandwidth = Annotated[float, _quantity(parse_bandwidth)]  # bytes/s, > 0
Duration = Annotated[float, _quantity(parse_duration)]  # seconds, >= 0
Flops = Annotated[float, _quantity(parse_flops)]  # FLOP/s, > 0
PositiveDuration = Annotated[float, _quantity(parse_duration, allow_zero=False)]

PosInt = Annotated[int, Field(strict=True, gt=0)]
NonNegInt = Annotated[int, Field(strict=True, ge=0)]
Efficiency = Annotated[float, BeforeValidator(no_bool), Field(strict=True, gt=0, le=1, allow_inf_nan=False)]
Fraction = Efficiency  # 0 < x <= 1 (kept fractions, degradation factors)
PosFloat = Annotated[float, BeforeValidator(no_bool), Field(strict=True, gt=0, allow_inf_nan=False)]
StrictBool = Annotated[bool, Field(strict=True)]
Key = Annotated[str, Field(strict=True, min_length=1)]
