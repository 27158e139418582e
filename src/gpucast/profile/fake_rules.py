"""Shape rules for aten ops that fake tensors cannot run, installed only while profiling.

``aten._ctc_loss`` is tagged as having a data-dependent output shape, because its ``log_alpha``
output is ``(batch, time, 2 * max(target_lengths) + 1)``. With the lengths given as Python ints
(the ``IntList`` overload) the shape is known without data, so we give it that rule. The rules
are registered in a scoped ``torch.library`` fragment and removed when the context exits, so
that profiling leaves torch as it found it; a rule torch already has is left alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch


def _ctc_loss(
    log_probs: torch.Tensor,
    targets: torch.Tensor,
    input_lengths: list[int],
    target_lengths: list[int],
    blank: int = 0,
    zero_infinity: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    # ``log_probs`` is (time, batch, classes): ``ctc_loss`` adds the batch dimension before it
    # calls ``_ctc_loss``. Outputs: the per-utterance loss and ``log_alpha``.
    steps, batch = log_probs.shape[0], log_probs.shape[1]
    longest = max(target_lengths, default=0)
    return log_probs.new_empty(batch), log_probs.new_empty(batch, steps, 2 * longest + 1)


_RULES: dict[str, Any] = {"aten::_ctc_loss": _ctc_loss}


@contextlib.contextmanager
def static_shape_rules() -> Iterator[None]:
    """Install the rules for the duration of the ``with`` block."""
    library = torch.library.Library("aten", "FRAGMENT")
    try:
        for name, rule in _RULES.items():
            with contextlib.suppress(RuntimeError):  # torch has its own rule: keep it
                torch.library.register_fake(name, rule, lib=library)
        yield
    finally:
        library._destroy()
