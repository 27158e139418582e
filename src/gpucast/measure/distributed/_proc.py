"""Child processes that die with their parent (Linux) and are stopped politely, then firmly."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that asks Linux to SIGKILL the child when its parent dies.

    A campaign driver killed with SIGKILL must not leave measurements running that nobody
    will collect. Elsewhere (macOS) this is not available and children are stopped only when
    the parent lives to stop them.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return None

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    return preexec


def popen_tied(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    stdout: IO[bytes] | int | None = None,
    stderr: IO[bytes] | int | None = None,
    cwd: Path | None = None,
    stdin: IO[bytes] | int | None = subprocess.DEVNULL,
) -> subprocess.Popen[bytes]:
    """Start ``command`` as a child that is killed when this process dies."""
    return subprocess.Popen(
        list(command),
        env=None if env is None else dict(env),
        stdout=stdout,
        stderr=stderr,
        stdin=stdin,
        cwd=cwd,
        preexec_fn=_die_with_parent(),
    )


def stop(processes: Sequence[subprocess.Popen[bytes]], grace_s: float = 3.0) -> None:
    """SIGTERM every live process, wait up to ``grace_s``, then SIGKILL what is left."""
    live = [p for p in processes if p.poll() is None]
    for p in live:
        with contextlib.suppress(ProcessLookupError):
            p.terminate()
    for p in live:
        try:
            p.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                p.kill()
            p.wait()


def child_env(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment plus ``extra``, with ``src`` importable in the child."""
    env = dict(os.environ)
    env.update(extra)
    package_root = str(Path(__file__).resolve().parents[3])
    path = env.get("PYTHONPATH", "")
    if package_root not in path.split(os.pathsep):
        env["PYTHONPATH"] = package_root + (os.pathsep + path if path else "")
    return env
