"""An example user workload for ``gpucast ... tests/workloads/example_user_model.py:build``.

``build`` returns ``(model, example_batch)``; ``build_with_loss`` adds a loss function;
``tied`` has tied weights (an embedding reused as the output layer).
"""

from __future__ import annotations

import torch
from torch import nn


class TwoInputNet(nn.Module):
    def __init__(self, features: int, hidden: int) -> None:
        super().__init__()
        self.a = nn.Linear(features, hidden)
        self.b = nn.Linear(features, hidden)
        self.out = nn.Linear(hidden, 3)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.a(x) + self.b(y)))


def build(features: int = 6, hidden: int = 8) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    generator = torch.Generator().manual_seed(0)
    example = (
        torch.randn(2, features, generator=generator),
        torch.randn(2, features, generator=generator),
    )
    return TwoInputNet(features, hidden), example


def build_with_loss(features: int = 6, hidden: int = 8):  # type: ignore[no-untyped-def]
    model, example = build(features, hidden)
    return model, example, lambda output: output.pow(2).sum()


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.head = nn.Linear(16, 50, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(tokens))


def tied() -> tuple[nn.Module, torch.Tensor]:
    return Tied(), torch.arange(12).view(3, 4) % 50


def not_a_pair() -> nn.Module:
    return nn.Linear(2, 2)


def no_batch_dim() -> tuple[nn.Module, torch.Tensor]:
    return nn.Linear(2, 2), torch.tensor(1.0)
