"""FLOP formulas: ``torch.utils.flop_counter``'s registry plus the ops it misses.

Added (each in the same convention, 2 FLOPs per multiply-accumulate):

* sparse matmul — ``aten._sparse_addmm`` and ``aten.mm`` with a sparse operand count
  ``2 * nnz * columns`` (flop_counter would count a dense ``mm`` of the full shape);
* the CPU attention kernels ``aten._scaled_dot_product_flash_attention_for_cpu`` and its
  backward, with flop_counter's own attention formulas (it only knows the CUDA kernels).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils import flop_counter

aten = torch.ops.aten


def _is_sparse(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.layout == torch.sparse_coo


def _mm(a: torch.Tensor, b: torch.Tensor, *args: Any, out_val: Any = None, **kwargs: Any) -> int:
    if _is_sparse(a):
        return 2 * int(a._nnz()) * int(b.shape[1])
    if _is_sparse(b):
        return 2 * int(b._nnz()) * int(a.shape[0])
    return int(flop_counter.mm_flop(a.shape, b.shape))


def _sparse_addmm(
    bias: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    *args: Any,
    out_val: Any = None,
    **kwargs: Any,
) -> int:
    return _mm(a, b)


def _cpu_flash(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *args: Any,
    out_val: Any = None,
    **kwargs: Any,
) -> int:
    return int(flop_counter.sdpa_flop_count(q.shape, k.shape, v.shape))


def _cpu_flash_backward(
    grad_out: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *args: Any,
    out_val: Any = None,
    **kwargs: Any,
) -> int:
    return int(flop_counter.sdpa_backward_flop_count(grad_out.shape, q.shape, k.shape, v.shape))


def extra_formulas() -> dict[Any, Callable[..., int]]:
    """Formulas to add to flop_counter's, keyed by op packet; they take the raw tensors."""
    formulas: dict[Any, Callable[..., int]] = {
        aten.mm: _mm,
        aten._sparse_addmm: _sparse_addmm,
        aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash,
        aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_flash_backward,
    }
    for formula in formulas.values():
        formula._get_raw = True  # type: ignore[attr-defined]  # FlopCounterMode: pass tensors
    return formulas


def registry() -> dict[Any, Callable[..., int]]:
    """flop_counter's registry overlaid with :func:`extra_formulas` (all take raw tensors)."""
    merged: dict[Any, Callable[..., int]] = dict(flop_counter.flop_registry)
    merged.update(extra_formulas())
    return merged
