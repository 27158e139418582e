"""A user model (``module:factory``) with a known gradient noise scale, for tests.

y = x . w* + eps with x ~ N(0, I_4), |w*| = 1, eps ~ N(0, 1); the model returns residuals and the
loss is half their mean square. At w = 0: |G|^2 = 1, tr(Sigma) = (d + 1) + d = 9, B_simple = 9.
"""

from __future__ import annotations

import torch
from torch import nn

ROWS = 4096


class Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 1, bias=False)
        nn.init.zeros_(self.linear.weight)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.linear(x).squeeze(-1) - y


def factory():  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(ROWS, 4, generator=gen)
    y = x[:, 0] + torch.randn(ROWS, generator=gen)
    return Residual(), (x, y), lambda r: 0.5 * (r**2).mean()
