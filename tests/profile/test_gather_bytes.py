"""Gathers read the rows their indices name, not the whole table they gather from."""

from __future__ import annotations

import torch

from gpucast.profile.flops import registry
from gpucast.profile.profiler import op_cost

FP32, INT64 = 4, 8


def _cost(func: torch._ops.OpOverload, *args: object) -> tuple[int, int]:
    out = func(*args)
    cost = op_cost(func, args, {}, out, registry())
    assert cost is not None
    return cost.bytes_read, cost.bytes_written


def test_embedding_reads_the_looked_up_rows() -> None:
    table, idx = torch.randn(50_000, 64), torch.tensor([[1, 7, 7, 42]])
    read, written = _cost(torch.ops.aten.embedding.default, table, idx)
    assert read == 4 * INT64 + 4 * 64 * FP32  # not the 12.8 MB table
    assert written == 4 * 64 * FP32


def test_index_select_and_gather_read_what_they_return() -> None:
    src, idx = torch.randn(1000, 16), torch.tensor([3, 5])
    read, _ = _cost(torch.ops.aten.index_select.default, src, 0, idx)
    assert read == 2 * INT64 + 2 * 16 * FP32
    g_idx = torch.zeros(4, 16, dtype=torch.int64)
    read, _ = _cost(torch.ops.aten.gather.default, src, 0, g_idx)
    assert read == 64 * INT64 + 64 * FP32


def test_an_embedding_bag_reads_one_row_per_index_before_pooling() -> None:
    table = torch.randn(10_000, 8)
    idx, offsets = torch.tensor([1, 2, 3, 4, 5, 6]), torch.tensor([0, 3])
    read, _ = _cost(torch.ops.aten._embedding_bag.default, table, idx, offsets)
    assert read == 6 * INT64 + 2 * INT64 + 6 * 8 * FP32


def test_a_dense_embedding_backward_still_writes_the_whole_table() -> None:
    grad, idx = torch.randn(1, 4, 64), torch.tensor([[1, 7, 7, 42]])
    _, written = _cost(
        torch.ops.aten.embedding_dense_backward.default, grad, idx, 50_000, -1, False
    )
    assert written == 50_000 * 64 * FP32
