"""The ``gpucast`` command: :func:`main` is the console script.

``gpucast --version`` is answered here without importing Typer, Rich or any verb; everything
else goes to the Typer group in :mod:`gpucast.cli.root` (``app``, also importable from here).
Errors from gpucast (``GpucastError``) become one red line on stderr and exit code 2 for bad
input or 1 for runtime failures; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import sys
from typing import Any

from gpucast._version import __version__


def main() -> None:
    if sys.argv[1:] == ["--version"]:  # the fast path: no Typer, Rich or verb module
        sys.stdout.write(f"gpucast {__version__}\n")
        return
    from gpucast.cli.root import app

    app()


def __getattr__(name: str) -> Any:
    if name in ("app", "GpucastGroup"):
        from gpucast.cli import root

        return getattr(root, name)
    raise AttributeError(f"module 'gpucast.cli.app' has no attribute {name!r}")
