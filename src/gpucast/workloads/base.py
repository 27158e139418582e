"""The workload interface every built-in and user model is adapted to.

A :class:`Workload` knows how to build its model, make a synthetic batch of any size on any
device (including ``meta`` for profiling without memory), and compute a training loss.
:func:`gpucast.workloads.steps.make_step` turns it into the
zero-argument callable the measurement harness times.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

# A batch is whatever the model's forward takes, plus the target the loss needs.
# ``inputs`` is passed as ``model(*inputs)``.
Batch = tuple[tuple[Any, ...], Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """A trainable model with synthetic data of the right shapes.

    name: the name it is known by on the command line.
    family: vision, language, recommendation, graph, mlp, user.
    sample_unit: what one batch element is (``images``, ``sequences``, ``samples``, ``nodes``).
    build_model: returns a fresh ``nn.Module`` on the CPU (call ``.to(device)`` yourself), or
        built directly on ``device`` when given (``meta`` for profiling).
    make_batch: ``(batch_size, device) -> Batch``; must work on ``torch.device("meta")``.
    loss: ``(model_output, target) -> scalar tensor``.
    options: every option the factory reads, as it resolved it (defaults included:
        ``{"seq_len": 128, "layers": 12, ...}``); empty for a user model. Two option sets
        that resolve alike build the same model (:func:`gpucast.workloads.canonical_options`).
    """

    name: str
    family: str
    sample_unit: str
    build_model: Callable[[torch.device], nn.Module]
    make_batch: Callable[[int, torch.device], Batch]
    loss: Callable[[Any, Any], torch.Tensor]
    description: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)
