"""User models whose step raises (``tests/workloads/failing_user_models.py:FACTORY``), each
for a different cause: a typo in ``forward``, a ``forward`` that needs a keyword argument the
example batch cannot give; and one whose control flow reads a tensor's value, which raises on
fake tensors only."""

from __future__ import annotations

import torch
from torch import nn


class _Typo(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fcc(x)  # type: ignore[no-any-return]  # the user's typo: AttributeError


class _Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor, *, scale: float) -> torch.Tensor:
        return self.fc(x) * scale


class _Branching(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(1 + int((x.sum() > 0).item())):  # control flow on a value
            x = torch.relu(self.fc(x))
        return x


def attribute_typo() -> tuple[nn.Module, torch.Tensor]:
    return _Typo(), torch.randn(2, 4)


def keyword_forward() -> tuple[nn.Module, torch.Tensor]:
    return _Scaled(), torch.randn(2, 4)


def branching() -> tuple[nn.Module, torch.Tensor]:
    """A positive example batch: its forward runs the layer twice (2 x 2 x 2 x 4 x 4 FLOPs)."""
    return _Branching(), torch.ones(2, 4)
