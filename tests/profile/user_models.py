"""User models (``tests/profile/user_models.py:FACTORY``) that once failed to profile (#22).

Each factory returns ``(model, example_batch)`` with the model and batch built on the CPU,
as a user would write them:

* ``residual_cnn``: BatchNorm (running statistics and ``num_batches_tracked`` buffers),
  in-place ``ReLU(inplace=True)``, an ``x += y`` residual, Dropout and a registered buffer;
* ``recurrent``: a 2-layer bidirectional LSTM, plus a plain tensor attribute (not a buffer);
* ``grouped``: a pointwise then a depthwise convolution (a grouped convolution's backward);
* ``on_meta``: the same residual CNN built on the ``meta`` device (no memory at all), with an
  example batch on the CPU;
* ``big_buffer``: a 64 MiB buffer, to show that profiling copies no tensor data.
"""

from __future__ import annotations

import os

import torch
from torch import nn

CHANNELS = 8
IMAGE = 6


class ResidualCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, CHANNELS, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(CHANNELS)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(CHANNELS, CHANNELS, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(CHANNELS)
        self.dropout = nn.Dropout(0.25)
        self.fc = nn.Linear(CHANNELS, 5)
        self.register_buffer("scale", torch.full((CHANNELS,), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(x))
        y += x  # in-place residual
        y = self.relu(y)
        pooled = y.mean(dim=(2, 3)) * self.scale
        return self.fc(self.dropout(pooled))


def residual_cnn() -> tuple[nn.Module, torch.Tensor]:
    return ResidualCNN(), torch.randn(2, 3, IMAGE, IMAGE)


class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(4, 8, num_layers=2, batch_first=True, bidirectional=True)
        self.head = nn.Linear(16, 3)
        self.offsets = torch.zeros(3)  # a plain tensor attribute

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(out[:, -1]) + self.offsets


def recurrent() -> tuple[nn.Module, torch.Tensor]:
    return Recurrent(), torch.randn(2, 5, 4)


def grouped() -> tuple[nn.Module, torch.Tensor]:
    model = nn.Sequential(
        nn.Conv2d(4, CHANNELS, 1, bias=False),
        nn.Conv2d(CHANNELS, CHANNELS, 3, padding=1, groups=CHANNELS, bias=False),
    )
    return model, torch.randn(2, 4, IMAGE, IMAGE)


def on_meta() -> tuple[nn.Module, torch.Tensor]:
    with torch.device("meta"):
        model = ResidualCNN()
    return model, torch.randn(2, 3, IMAGE, IMAGE)


def big_buffer() -> tuple[nn.Module, torch.Tensor]:
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    model.register_buffer("table", torch.zeros(16 * 2**20))  # 64 MiB of fp32
    return model, torch.randn(2, 4)


def wrong_batch() -> tuple[nn.Module, torch.Tensor]:
    """An example batch of 9 features for a layer taking 8: the user's shape bug."""
    return nn.Linear(8, 2), torch.randn(4, 9)


def encoder() -> tuple[nn.Module, torch.Tensor]:
    """Two nn.TransformerEncoderLayer blocks (d 16, 2 heads, feed-forward 32): in eval() and
    no_grad PyTorch runs them through its fused fast path."""
    layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), torch.randn(2, 5, 16)


def records_device() -> tuple[nn.Module, torch.Tensor]:
    """A factory that builds where the caller's default device says, and appends that device
    to the file ``$BUILT_ON`` names (each load imports this file afresh)."""
    model = nn.Linear(8, 4)
    with open(os.environ["BUILT_ON"], "a") as out:
        out.write(model.weight.device.type + "\n")
    return model, torch.randn(2, 8)


def real_only() -> tuple[nn.Module, torch.Tensor]:
    """A factory that reads a tensor's value (as one loading a checkpoint or sizing a layer
    from data does): it cannot run on the meta device."""
    width = int(torch.tensor([3.0]).sum().item())
    return nn.Linear(width, 2), torch.randn(2, width)
