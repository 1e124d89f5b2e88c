"""A one-line progress bar (points done, rate, ETA) on a terminal; silent when output is not a terminal.

Long work (sweeps, Monte Carlo goodput, validation runs) draws one on stderr; work with no countable steps (one
long estimate) shows its elapsed time (`Status`). `quiet()` turns every bar
off for a block, which the CLI does for `--json`, so machine-readable output never carries one.
"""
from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
import time
from typing import Iterator, TextIO

_SHOW = contextvars.ContextVar("simdist_progress_shown", default=True)
_OPEN = [0]  # bars drawing now in this process: a bar inside another one's work (a case's iterations under
# the published suite's cases, a point's replicas under an in-process sweep) stays silent, so lines never interleave


@contextlib.contextmanager
def quiet(active: bool = True) -> Iterator[None]:
    """No progress bar inside this block (when `active`)."""
    token = _SHOW.set(False) if active else None
    try:
        yield
    finally:
        if token is not None:
            _SHOW.reset(token)


class Progress:
    """Call `advance(n)` as points finish and `close()` at the end; redraws at most 10 times a second."""

    def __init__(self, total: int, label: str = "points", stream: TextIO | None = None,
                 enabled: bool | None = None, delay_s: float = 0.0) -> None:
        self.total, self.label, self.done = total, label, 0
        self.stream = stream or sys.stderr
        self.enabled = (self.stream.isatty() and _SHOW.get() and not _OPEN[0]) if enabled is None else enabled
        self._open = bool(self.enabled)
        _OPEN[0] += self._open
        self._start = time.monotonic()
        self._drawn = 0.0
        self.note = ""  # appended to the line, e.g. '12 cluster states simulated'
        self.delay_s = delay_s  # draw nothing until this long has passed: quick work leaves no bar behind
        self._shown = False

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self.done >= self.total:
            self._release()  # finished work no longer silences other bars, closed or not
        now = time.monotonic()
        if now - self._start < self.delay_s:
            return
        if self.enabled and (now - self._drawn > 0.1 or self.done >= self.total):
            self._drawn, self._shown = now, True
            self.stream.write("\r" + self.line(now - self._start))
            self.stream.flush()

    def line(self, elapsed_s: float) -> str:
        """'[#####.....]  30/60 points  12.0/s  ETA 2.5 s'."""
        width = 24
        frac = self.done / self.total if self.total else 1.0
        bar = "#" * int(round(frac * width))
        rate = self.done / elapsed_s if elapsed_s > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else float("nan")
        eta_text = f"ETA {_duration(eta)}" if self.done < self.total else f"in {_duration(elapsed_s)}"
        note = f"  {self.note}" if self.note else ""
        return f"[{bar:<{width}}] {self.done}/{self.total} {self.label}  {rate:.1f}/s  {eta_text}{note}  "

    def _release(self) -> None:
        if self._open:  # the count drops once
            _OPEN[0] -= 1
            self._open = False

    def close(self) -> None:
        self._release()
        if self.enabled and self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False


class Status:
    """'estimating gpt (16,384 GPUs)  12.0 s' on one redrawn stderr line while work with no countable steps runs
    (one long `estimate` or `run`), from `delay_s` on, so quick runs print nothing. A thread redraws it twice a
    second; it steps aside while a Progress bar draws (replicas, phases) and the line is wiped at the end.
    Silent when not a terminal and inside quiet(). Use as a context manager."""

    def __init__(self, label: str, stream: TextIO | None = None, enabled: bool | None = None,
                 delay_s: float = 1.0, interval_s: float = 0.5) -> None:
        self.label, self.delay_s, self.interval_s = label, delay_s, interval_s
        self.stream = stream or sys.stderr
        self.enabled = (self.stream.isatty() and _SHOW.get()) if enabled is None else enabled
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._width = 0

    def __enter__(self) -> "Status":
        if self.enabled:
            self._start = time.monotonic()
            self._thread = threading.Thread(target=self._draw, name="simdist-status", daemon=True)
            self._thread.start()
        return self

    def _draw(self) -> None:
        if self._stop.wait(self.delay_s):
            return
        while not self._stop.is_set():
            if not _OPEN[0]:  # a bar of countable work draws instead
                text = f"{self.label}  {_duration(time.monotonic() - self._start)}"
                self.stream.write("\r" + text.ljust(self._width))
                self.stream.flush()
                self._width = max(self._width, len(text))
            self._stop.wait(self.interval_s)

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            if self._width:  # wipe the line: the report starts on a clean one
                self.stream.write("\r" + " " * self._width + "\r")
                self.stream.flush()


def _duration(s: float) -> str:
    if s != s:  # NaN
        return "?"
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"
