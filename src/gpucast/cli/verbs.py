"""The list of verbs, in the order ``gpucast --help`` shows them."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    # Each verb module exposes either ``app`` (a group) or ``command`` (a single verb).
    # Imported here, not at module top, so `gpucast --version` stays fast.
    pass
