"""FLOP formulas: ``torch.utils.flop_counter``'s registry plus the ops it misses.

Added (each in the same convention, 2 FLOPs per multiply-accumulate):

* sparse matmul — ``aten._sparse_addmm`` and ``aten.mm`` with a sparse operand count
  ``2 * nnz * columns`` (flop_counter would count a dense ``mm`` of the full shape);
* the CPU attention kernels ``aten._scaled_dot_product_flash_attention_for_cpu`` and its
  backward, with flop_counter's own attention formulas (it only knows the CUDA kernels);
* ``aten.convolution_backward`` for grouped (e.g. depthwise) convolutions: flop_counter counts
  the weight gradient as a dense convolution over all input channels, ``groups`` times too
  many (232x for a 232-channel depthwise layer). Each of the two gradients does as many
  multiply-accumulates as the forward convolution (every weight meets every output position
  of its group once), so we count ``forward * (input grad + weight grad)``; for
  ``groups = 1`` this is flop_counter's own figure;
* the fused recurrent kernels (LSTM on CPU runs as one ``aten.mkldnn_rnn_layer`` per layer and
  direction, on CUDA as ``aten._cudnn_rnn``), which flop_counter does not count at all. Each
  time step of a layer multiplies the input by ``W_ih`` (gates*hidden x input) and the
  previous hidden state by ``W_hh`` (gates*hidden x hidden; x proj with ``proj_size``, plus
  ``W_hr``), so the forward pass costs ``2 * tokens * (numel of the 2-D weights)``, tokens
  being sequence length x batch (or the packed rows). The backward pass costs that once for
  the data gradients (input and recurrent; the kernels compute the input gradient even for
  the first layer) and once more for the weight gradients. The gate nonlinearities are
  elementwise and, as for other layers, not counted. (GRU and plain RNN on CPU decompose into
  ``addmm``/``mm``, which flop_counter counts.)
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


def _convolution_backward(
    grad_out: torch.Tensor,
    input: torch.Tensor,
    weight: torch.Tensor,
    bias_sizes: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    transposed: bool,
    output_padding: Any,
    groups: int,
    output_mask: Any,
    *args: Any,
    out_val: Any = None,
    **kwargs: Any,
) -> int:
    forward = int(
        flop_counter.conv_flop_count(
            list(input.shape), list(weight.shape), list(grad_out.shape), bool(transposed)
        )
    )
    return forward * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


def _rnn_tokens(input: torch.Tensor) -> int:
    """Time steps x batch of a recurrent kernel's input (T, B, I), (B, T, I) or packed (N, I)."""
    return int(input.numel() // input.shape[-1]) if input.dim() else 0


def _matrix_elements(weights: Any) -> int:
    return sum(int(w.numel()) for w in weights if isinstance(w, torch.Tensor) and w.dim() == 2)


def _mkldnn_rnn_layer(
    input: torch.Tensor,
    weight_ih: torch.Tensor,
    weight_hh: torch.Tensor,
    *args: Any,
    out_val: Any = None,
    **kwargs: Any,
) -> int:
    return 2 * _rnn_tokens(input) * _matrix_elements((weight_ih, weight_hh))


def _mkldnn_rnn_layer_backward(
    input: torch.Tensor,
    weight_ih: torch.Tensor,
    weight_hh: torch.Tensor,
    *args: Any,
    out_val: Any = None,
    **kwargs: Any,
) -> int:
    return 2 * _mkldnn_rnn_layer(input, weight_ih, weight_hh)


def _cudnn_rnn(
    input: torch.Tensor, weight: list[torch.Tensor], *args: Any, out_val: Any = None, **kwargs: Any
) -> int:
    return 2 * _rnn_tokens(input) * _matrix_elements(weight)


def _cudnn_rnn_backward(
    input: torch.Tensor,
    weight: list[torch.Tensor],
    *args: Any,
    output_mask: Any = None,
    out_val: Any = None,
    **kwargs: Any,
) -> int:
    mask = output_mask if output_mask is not None else (args[-1] if args else (True,) * 4)
    forward = _cudnn_rnn(input, weight)
    # Data gradients always run (the weight gradients need the recurrent ones); weights if asked.
    return forward * (2 if mask[3] else 1)


def extra_formulas() -> dict[Any, Callable[..., int]]:
    """Formulas to add to flop_counter's, keyed by op packet; they take the raw tensors."""
    formulas: dict[Any, Callable[..., int]] = {
        aten.mm: _mm,
        aten._sparse_addmm: _sparse_addmm,
        aten.convolution_backward: _convolution_backward,
        aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash,
        aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_flash_backward,
        aten.mkldnn_rnn_layer: _mkldnn_rnn_layer,
        aten.mkldnn_rnn_layer_backward: _mkldnn_rnn_layer_backward,
        aten._cudnn_rnn: _cudnn_rnn,
        aten._cudnn_rnn_backward: _cudnn_rnn_backward,
    }
    for formula in formulas.values():
        formula._get_raw = True  # type: ignore[attr-defined]  # FlopCounterMode: pass tensors
    return formulas


def registry() -> dict[Any, Callable[..., int]]:
    """flop_counter's registry overlaid with :func:`extra_formulas` (all take raw tensors)."""
    merged: dict[Any, Callable[..., int]] = dict(flop_counter.flop_registry)
    merged.update(extra_formulas())
    return merged
