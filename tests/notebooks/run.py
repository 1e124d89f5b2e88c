"""Execute the notebooks from a clean kernel (nbclient); `python -m tests.notebooks.run` writes the
executed copies under out/notebooks/ (what `make notebooks` runs). The stored notebooks carry no outputs.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"


def notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb"))


def execute(path: Path, out_dir: Path | None = None, timeout_s: int = 600):
    """Run every cell of `path` in a fresh python3 kernel (cwd = notebooks/); returns the executed notebook.

    A failing cell raises nbclient's CellExecutionError with the cell's traceback.
    """
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    try:
        NotebookClient(nb, timeout=timeout_s, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    finally:  # a failed run is written too, up to the failing cell, to read what it printed
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, out_dir / path.name)
    return nb


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=str(ROOT / "out" / "notebooks"), help="where to write executed copies")
    ap.add_argument("names", nargs="*", help="notebook file names (default: all)")
    args = ap.parse_args(argv)
    chosen = [p for p in notebooks() if not args.names or p.name in args.names]
    for path in chosen:
        t0 = time.perf_counter()
        execute(path, Path(args.out))
        print(f"{path.name}: ok in {time.perf_counter() - t0:.1f} s -> {args.out}/{path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
