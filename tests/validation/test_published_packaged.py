"""The published-benchmark suite works from an installed (non-editable) wheel, not only from a checkout.

`validation/published/cases.yaml` and its scenarios are package data of `simdist.validation.published` (one copy,
pyproject.toml's package-data); `cases.py` finds the data file with importlib.resources. The fast tests
check that every file the suite reads lies inside the package and is matched by a package-data glob; the
slow test builds the wheel from a copy of the sources, installs it into an empty folder and runs the
loader there, with the checkout out of reach.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.resources import files
from pathlib import Path, PurePosixPath

import pytest
import yaml

from simdist.validation.published import cases as cases_mod

ROOT = Path(__file__).resolve().parents[2]


def _shipped_globs() -> list[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    return list(data.get(cases_mod.PACKAGE, []))


def _referenced_files() -> list[str]:
    raw = yaml.safe_load(cases_mod.CASES_FILE.read_text())
    return sorted({c[k]["file"] for c in raw["cases"] for k in ("scenario", "baseline") if c.get(k)})


def test_the_data_file_is_found_as_package_data():
    resource = files(cases_mod.PACKAGE).joinpath("cases.yaml")
    assert resource.is_file()
    assert cases_mod.CASES_FILE == Path(str(resource)) and cases_mod.load_cases().path == cases_mod.CASES_FILE
    assert sorted(_shipped_globs()) == sorted(cases_mod.PACKAGE_DATA)


def test_every_file_the_suite_reads_ships_with_the_package():
    package_dir = Path(str(files(cases_mod.PACKAGE)))
    globs = _shipped_globs()
    for rel in ["cases.yaml", *_referenced_files()]:
        norm = os.path.normpath(rel)
        assert not norm.startswith("..") and not os.path.isabs(norm), f"{rel}: outside the package, not in the wheel"
        # setuptools' `*` stops at a folder; fnmatch's would not
        assert any(PurePosixPath(norm).match(g) and norm.count("/") == g.count("/") for g in globs), \
            f"{rel}: no package-data glob ships it"
        assert (package_dir / norm).is_file(), rel


def test_the_gpt3_case_reads_the_preset_itself():
    """One source of truth: the case's scenario is a link to the shipped preset, not a copy."""
    linked = Path(str(files(cases_mod.PACKAGE))) / "scenarios" / "megatron-gpt3-175b.yaml"
    assert linked.resolve() == (ROOT / "scenarios" / "presets" / "megatron-gpt3-175b.yaml").resolve()
    case = next(c for c in cases_mod.load_cases().cases if c.name == "megatron-gpt3-175b-1024-a100")
    assert case.scenario.describe() == "scenarios/megatron-gpt3-175b.yaml"


CHECK = r"""
import sys
from importlib.resources import files
from pathlib import Path
import simdist
from simdist.validation.published import cases
site = Path(sys.argv[1]).resolve()
assert Path(cases.__file__).resolve().is_relative_to(site), cases.__file__
assert Path(simdist.__file__).resolve().is_relative_to(site), simdist.__file__
data = cases.load_cases(files("simdist.validation.published") / "cases.yaml")
for case in data.cases:
    for ref in (case.scenario, case.baseline):
        if ref is not None:
            assert Path(ref.file).resolve().is_relative_to(site), ref.file
            simdist.load(ref.file, list(ref.overrides))
one = [c for c in data.cases if c.name == "megatron-gpt3-175b-1024-a100"]
assert one and not Path(one[0].scenario.file).is_symlink()
print(len(data.cases))
"""


@pytest.mark.slow
def test_the_suite_loads_from_an_installed_wheel(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for pkg in ("simdist", "validation"):
        shutil.copytree(ROOT / pkg, src / pkg, ignore=ignore)   # symlinks followed, as the wheel build does
    pip = [sys.executable, "-m", "pip"]
    built = subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-v", "-w", str(tmp_path / "dist"), str(src)],
                           capture_output=True, text=True, cwd=tmp_path)
    assert built.returncode == 0, built.stderr[-2000:]
    log = built.stdout + built.stderr
    warnings = [ln for ln in log.splitlines() if "deprecat" in ln.lower() or "BuildBackendWarning" in ln]
    assert not warnings, "\n".join(warnings)   # what `pip install .` would print
    wheel = next((tmp_path / "dist").glob("simdist-*.whl"))
    with zipfile.ZipFile(wheel) as whl:
        top = {name.split("/")[0] for name in whl.namelist()}
    assert top == {"simdist", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}, top
    site = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "-q", "--target", str(site), str(wheel)], check=True,
                   capture_output=True, cwd=tmp_path)
    env = {**os.environ, "PYTHONPATH": str(site)}
    run = subprocess.run([sys.executable, "-c", CHECK, str(site)], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    assert int(run.stdout.split()[-1]) == len(cases_mod.load_cases().cases)
