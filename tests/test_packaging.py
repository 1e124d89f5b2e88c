"""pyproject.toml lists its packages explicitly (validation/ installs as simdist.validation, nothing named
`validation` at the top level): every folder of importable code or shipped data is in the list, nothing else."""
from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _folders() -> set[str]:
    """Dotted names of the folders under simdist/ and validation/ holding .py or .yaml files, as installed."""
    out = set()
    for top, name in (("simdist", "simdist"), ("validation", "simdist.validation")):
        for path in (ROOT / top).rglob("*"):
            if path.suffix in (".py", ".yaml") and "__pycache__" not in path.parts:
                rel = path.parent.relative_to(ROOT / top)
                out.add(".".join([name, *rel.parts]))
    return out


def test_every_folder_is_a_listed_package():
    assert set(_config()["packages"]) == _folders()


def test_validation_installs_under_simdist():
    config = _config()
    assert config["package-dir"] == {"simdist.validation": "validation"}
    assert not any(p == "validation" or p.startswith("validation.") for p in config["packages"])


def test_license_is_an_spdx_string():
    """A TOML table here is deprecated by setuptools and stops building on 2027-02-18."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert isinstance(project["license"], str)


def test_an_unknown_name_says_what_exists():
    import pytest

    import simdist

    with pytest.raises(AttributeError, match="did you mean 'load'"):
        simdist.lod  # noqa: B018
    with pytest.raises(AttributeError, match="the public names are"):
        simdist.nothing_like_it  # noqa: B018
