"""`gpucast validate`."""

from __future__ import annotations


def command() -> None:
    """Cross-validate the performance models (placeholder)."""
