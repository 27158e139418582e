"""`gpucast profile WORKLOAD`."""

from __future__ import annotations


def command() -> None:
    """Static features of a workload (placeholder)."""
