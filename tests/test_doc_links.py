"""Every reference in the docs users read resolves: markdown links to files (and their #anchors), and
repository paths quoted in backticks (`docs/results.md`, `scenarios/presets/horovod.yaml`). Nothing points
at files outside the repository (users do not have them)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# the project's own docs; not the READMEs tools drop in hidden folders (.pytest_cache/README.md)
DOCS = sorted(p for p in [ROOT / "README.md", ROOT / "CHANGELOG.md", *ROOT.glob("docs/*.md"), *ROOT.glob("*/README.md"),
                          *ROOT.glob("validation/*/README.md")]
              if not any(part.startswith(".") for part in p.relative_to(ROOT).parts))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
TICKED = re.compile(r"`((?:docs|scenarios|notebooks|validation|benchmarks|simdist|tests)/[\w./-]+)`")


def _anchors(md: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    for line in md.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


@pytest.mark.parametrize("md", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_reference_resolves(md: Path):
    text = md.read_text()
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (md.parent / path).resolve() if path else md
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target} (no such heading)")
    for quoted in TICKED.findall(text):  # a repository path; patterns such as `tests/*.py` are not checked
        if not any(c in quoted for c in "*<>") and not (ROOT / quoted.rstrip("/.")).exists():
            broken.append(f"`{quoted}`")
    assert not broken, f"{md.relative_to(ROOT)}: {broken}"


@pytest.mark.parametrize("md", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_points_outside_the_repository(md: Path):
    text = md.read_text()
    assert "../shared" not in text and "DESIGN.md" not in text
