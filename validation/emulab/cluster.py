"""EmulatedCluster: build an EmulabLayout on enter, tear it down on exit, on errors and on SIGINT/SIGTERM.

One cluster at a time per machine (a file lock), because two concurrent emulations would share the
two CPU cores and spoil each other's timings. Teardown kills only the pids `ip netns pids` lists for
the namespaces this object created, then deletes those namespaces (which removes veths and bridges).
"""
from __future__ import annotations

import fcntl
from contextlib import contextmanager
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from types import FrameType
from typing import Iterator, Mapping, Sequence

from simdist.errors import SimdistError
from simdist.validation.emulab.commands import build_plan, rerate_plan
from simdist.validation.emulab.layout import EmulabLayout

LOCK_PATH = "/tmp/simdist-emulab.lock"
_STALE_RE = re.compile(r"^sdt[a-z0-9]{0,6}-(h\d+|sw)$")


class EmulabError(SimdistError):
    """The emulated cluster cannot be built here (no root, no `ip`/`tc`, namespaces refused)."""

    exit_code = 2


class Terminated(BaseException):
    """Raised in the main thread on SIGTERM so that context managers unwind and clean up."""


def _run(argv: Sequence[str], check: bool = True, timeout_s: float = 30.0) -> subprocess.CompletedProcess:
    res = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s)
    if check and res.returncode != 0:
        raise EmulabError(f"command failed ({res.returncode}): {' '.join(argv)}: {res.stderr.strip()}")
    return res


def check_privileges() -> None:
    """Raise EmulabError with a one-line reason unless root with working `ip netns` and `tc`."""
    if os.geteuid() != 0:
        raise EmulabError("the emulated cluster needs root (network namespaces); run as root or use --launcher local")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise EmulabError(f"the emulated cluster needs '{tool}' (iproute2) on PATH")
    if _run(["ip", "netns", "list"], check=False).returncode != 0:
        raise EmulabError("'ip netns list' failed: network namespaces are not available here")


def list_namespaces() -> list[str]:
    out = _run(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _kill_ns_pids(ns: str, grace_s: float = 2.0) -> None:
    """SIGTERM, then SIGKILL, every process `ip netns pids` lists for `ns` (and nothing else)."""
    def pids() -> list[int]:
        out = _run(["ip", "netns", "pids", ns], check=False).stdout
        return [int(p) for p in out.split() if p.isdigit() and int(p) != os.getpid()]

    for sig in (signal.SIGTERM, signal.SIGKILL):
        live = pids()
        if not live:
            return
        for pid in live:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and pids():
            time.sleep(0.05)


def _delete_namespaces(names: Sequence[str]) -> None:
    for ns in names:
        _kill_ns_pids(ns)
    for ns in names:
        _run(["ip", "netns", "del", ns], check=False)


class _Lock:
    """An exclusive flock on LOCK_PATH, waited for up to `timeout_s`; released when the process dies."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(LOCK_PATH, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.fd = fd
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise EmulabError(f"another emulated cluster holds {LOCK_PATH} (waited {self.timeout_s:.0f} s)")
                time.sleep(0.2)

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


@contextmanager
def machine_lock(timeout_s: float = 600.0) -> Iterator[None]:
    """Hold the machine-wide emulation lock (e.g. while timing local runs that must not share the CPUs)."""
    lock = _Lock(timeout_s)
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


def cleanup_stale(lock_timeout_s: float = 600.0) -> list[str]:
    """Delete leftover `sdt*-h<i>` / `sdt*-sw` namespaces of a killed run; returns the names removed.

    Takes the cluster lock first, so a live cluster of another process is never touched.
    """
    check_privileges()
    lock = _Lock(lock_timeout_s)
    lock.acquire()
    try:
        stale = [ns for ns in list_namespaces() if _STALE_RE.match(ns)]
        stale.sort(key=lambda n: n.endswith("-sw"))  # hosts first, the switch last
        _delete_namespaces(stale)
        return stale
    finally:
        lock.release()


class EmulatedCluster:
    """Context manager owning the namespaces of one EmulabLayout.

    >>> with EmulatedCluster(EmulabLayout(hosts=4, host_rate_bps=500e6)) as cl:
    ...     proc = cl.popen(0, ["python", "-m", "simdist.validation.worker", ...], env={...})
    """

    def __init__(self, layout: EmulabLayout, lock_timeout_s: float = 600.0) -> None:
        self.layout = layout
        self.lock_timeout_s = lock_timeout_s
        self._created: list[str] = []
        self._lock: _Lock | None = None
        self._old_handlers: dict[int, object] = {}

    @classmethod
    def from_scenario(cls, scenario: object, rate_scale: float = 1.0, **kw: object) -> "EmulatedCluster":
        """The cluster of `scenario` (see layout.from_scenario)."""
        from simdist.validation.emulab.layout import from_scenario
        return cls(from_scenario(scenario, rate_scale=rate_scale), **kw)  # type: ignore[arg-type]

    # ---- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> "EmulatedCluster":
        check_privileges()
        self._lock = _Lock(self.lock_timeout_s)
        self._lock.acquire()
        try:
            self._install_handlers()
            ours = set(self.layout.namespaces())
            leftovers = [ns for ns in list_namespaces() if ns in ours]
            _delete_namespaces(leftovers)  # stale: we hold the lock, so no live run owns them
            for argv in build_plan(self.layout):
                if argv[:3] == ["ip", "netns", "add"]:
                    self._created.append(argv[3])
                _run(argv)
        except BaseException:
            self._teardown()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._teardown()

    def _install_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def on_term(signum: int, frame: FrameType | None) -> None:
            raise Terminated(f"signal {signum}")

        self._old_handlers[signal.SIGTERM] = signal.signal(signal.SIGTERM, on_term)
        self._old_handlers[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)

    def _teardown(self) -> None:
        """Kill our namespaces' processes and delete them; signals wait until this is done."""
        main = threading.current_thread() is threading.main_thread()
        blocked = {signal.SIGINT, signal.SIGTERM}
        if main:
            signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        try:
            hosts_first = sorted(self._created, key=lambda n: n == self.layout.switch_ns)
            _delete_namespaces(hosts_first)
            self._created = []
            for sig, handler in self._old_handlers.items():
                signal.signal(sig, handler)  # type: ignore[arg-type]
            self._old_handlers = {}
            if self._lock is not None:
                self._lock.release()
                self._lock = None
        finally:
            if main:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)

    # ---- use ---------------------------------------------------------------------------------
    @property
    def namespaces(self) -> list[str]:
        return list(self._created)

    def host_argv(self, host: int, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        """`argv` wrapped to run inside host's namespace, with `env` set by `env(1)`."""
        pre = ["ip", "netns", "exec", self.layout.host_ns(host)]
        if env:
            pre += ["env", *(f"{k}={v}" for k, v in env.items())]
        return pre + list(argv)

    def popen(self, host: int, argv: Sequence[str], env: Mapping[str, str] | None = None,
              **kw: object) -> subprocess.Popen:
        """Start `argv` inside host's namespace (its pid is then listed by `ip netns pids`)."""
        return subprocess.Popen(self.host_argv(host, argv, env), **kw)  # type: ignore[call-overload]

    def run(self, host: int, argv: Sequence[str], timeout_s: float = 30.0) -> subprocess.CompletedProcess:
        return _run(self.host_argv(host, argv), check=False, timeout_s=timeout_s)

    def ping(self, src: int, dst: int, timeout_s: float = 5.0, port: int = 29399) -> bool:
        """True when a TCP connection from host `src` reaches a listener on host `dst` (no ping here)."""
        listen = (f"import socket;s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);"
                  f"s.bind(('{self.layout.address(dst)}',{port}));s.listen(1);s.settimeout({timeout_s});"
                  f"c,_=s.accept();c.sendall(b'ok');c.close()")
        connect = (f"import socket,time,sys\nfor _ in range({int(timeout_s * 10)}):\n try:\n"
                   f"  c=socket.create_connection(('{self.layout.address(dst)}',{port}),timeout=1);"
                   f"sys.exit(0 if c.recv(2)==b'ok' else 1)\n except OSError: time.sleep(0.1)\nsys.exit(1)")
        server = self.popen(dst, [sys.executable, "-c", listen], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            ok = self.run(src, [sys.executable, "-c", connect], timeout_s=timeout_s + 5).returncode == 0
        finally:
            try:
                server.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        return ok

    def rerate(self, host_rate_bps: float, uplink_rate_bps: float | None = None) -> None:
        """Change the shaped rates in place; existing TCP connections survive."""
        for argv in rerate_plan(self.layout, host_rate_bps, uplink_rate_bps):
            _run(argv)
