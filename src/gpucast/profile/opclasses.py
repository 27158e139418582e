"""Which class an aten operator belongs to, and whether it does arithmetic.

Classes: ``matmul_conv`` (what ``torch.utils.flop_counter`` counts: matrix multiplications,
convolutions, attention, plus sparse matmul), ``elementwise`` (ops tagged pointwise, dropout,
random generation, the optimizers' ``_foreach_``/fused kernels), ``normalization`` (batch,
layer and group norm, softmax), ``reduction`` (sums, means, maxima, losses, pooling),
``embedding`` (embedding and embedding-bag lookups and their backward), ``other`` (copies,
concatenation, indexing, padding, creation: data movement, no arithmetic, except the
accumulating index ops listed in ``_ARITHMETIC_OTHER``).
"""

from __future__ import annotations

from functools import cache

import torch

NORMALIZATION = frozenset(
    {
        "native_batch_norm",
        "native_batch_norm_backward",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_functional",
        "_native_batch_norm_legit_no_training",
        "_batch_norm_with_update",
        "_batch_norm_with_update_functional",
        "_batch_norm_no_update",
        "batch_norm_backward",
        "cudnn_batch_norm",
        "cudnn_batch_norm_backward",
        "miopen_batch_norm",
        "miopen_batch_norm_backward",
        "native_layer_norm",
        "native_layer_norm_backward",
        "native_group_norm",
        "native_group_norm_backward",
        "_fused_rms_norm",
        "_fused_rms_norm_backward",
        "_softmax",
        "_softmax_backward_data",
        "_log_softmax",
        "_log_softmax_backward_data",
        "_safe_softmax",
    }
)
REDUCTION = frozenset(
    {
        "sum",
        "mean",
        "amax",
        "amin",
        "max",
        "min",
        "argmax",
        "argmin",
        "prod",
        "var",
        "std",
        "var_mean",
        "std_mean",
        "norm",
        "linalg_vector_norm",
        "logsumexp",
        "cumsum",
        "all",
        "any",
        "nll_loss_forward",
        "nll_loss_backward",
        "nll_loss2d_forward",
        "nll_loss2d_backward",
        "mse_loss",
        "mse_loss_backward",
        "binary_cross_entropy",
        "binary_cross_entropy_backward",
        "binary_cross_entropy_with_logits",
        "_ctc_loss",
        "_ctc_loss_backward",
        "max_pool2d_with_indices",
        "max_pool2d_with_indices_backward",
        "avg_pool2d",
        "avg_pool2d_backward",
        "_adaptive_avg_pool2d",
        "_adaptive_avg_pool2d_backward",
        "adaptive_max_pool2d",
        "adaptive_max_pool2d_backward",
        "_sparse_sum",
        "_sparse_sum_backward",
    }
)
EMBEDDING = frozenset(
    {
        "embedding",
        "embedding_dense_backward",
        "embedding_backward",
        "_embedding_bag",
        "_embedding_bag_forward_only",
        "_embedding_bag_backward",
        "_embedding_bag_dense_backward",
        "_embedding_bag_sparse_backward",
        "_embedding_bag_per_sample_weights_backward",
    }
)
ELEMENTWISE_EXTRA = frozenset(
    {
        "native_dropout",
        "native_dropout_backward",
        "bernoulli",
        "bernoulli_",
        "rand",
        "rand_like",
        "randn",
        "randn_like",
        "uniform_",
        "normal_",
        "_fused_sgd_",
        "_fused_adam_",
        "_fused_adamw_",
        "threshold_backward",
        "gelu_backward",
        "silu_backward",
    }
)
# Movement or creation that pointwise tags would otherwise put among the arithmetic.
_MOVEMENT = frozenset(
    {
        "copy_",
        "copy",
        "_to_copy",
        "clone",
        "fill_",
        "fill",
        "zero_",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "lift_fresh_copy",
        "where",
        "masked_fill",
        "masked_fill_",
        "_foreach_copy_",
        "_foreach_zero_",
    }
)
_ARITHMETIC_OTHER = frozenset(
    {
        "index_add",
        "index_add_",
        "scatter_add",
        "scatter_add_",
        "scatter_reduce",
        "scatter_reduce_",
        "index_put",
        "index_put_",
        "_index_put_impl_",
    }
)
# Allocation and metadata: no bytes move.
NO_TRAFFIC = frozenset(
    {
        "empty",
        "empty_strided",
        "empty_like",
        "new_empty",
        "new_empty_strided",
        "detach",
        "alias",
        "_unsafe_view",
        "lift_fresh",
        "_local_scalar_dense",
        "set_",
        "resize_",
        "sym_size",
        "sym_stride",
        "sym_numel",
        "sym_storage_offset",
        "is_same_size",
        "_has_compatible_shallow_copy_type",
    }
)


@cache
def classify(packet_name: str, pointwise: bool) -> str:
    """The operator class of ``aten.<packet_name>`` (``pointwise``: has the pointwise tag)."""
    if packet_name in NORMALIZATION:
        return "normalization"
    if packet_name in REDUCTION:
        return "reduction"
    if packet_name in EMBEDDING:
        return "embedding"
    if packet_name in _MOVEMENT:
        return "other"
    if pointwise or packet_name in ELEMENTWISE_EXTRA or packet_name.startswith("_foreach_"):
        return "elementwise"
    return "other"


def is_pointwise(func: torch._ops.OpOverload) -> bool:
    return torch.Tag.pointwise in func.tags


def does_arithmetic(packet_name: str, op_class: str) -> bool:
    """Whether the op computes (as opposed to only moving or creating data)."""
    if op_class == "other":
        return packet_name in _ARITHMETIC_OTHER
    return True
