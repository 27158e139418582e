"""The PyTorch GAT on sampled blocks: attention as the dense definition, sampling as DGL's."""

from __future__ import annotations

import numpy as np
import torch

from gpucast.workloads.graph import GAT, GATLayer, csc, sample_blocks


def test_gat_layer_matches_the_dense_definition() -> None:
    torch.manual_seed(0)
    layer = GATLayer(6, 8, heads=2)
    h_src, h_dst = torch.randn(5, 6), torch.randn(3, 6)
    src = torch.tensor([0, 1, 2, 3, 4, 0, 2])
    dst = torch.tensor([0, 0, 1, 1, 1, 2, 2])
    out = layer(h_src, h_dst, src, dst)
    z_src = layer.w_src(h_src).view(5, 2, 4)
    z_dst = layer.w_dst(h_dst).view(3, 2, 4)
    for i in range(3):
        nbrs = src[dst == i]
        for k in range(2):
            score = torch.nn.functional.leaky_relu(
                (z_src[nbrs, k] * layer.a_src[k]).sum(-1) + (z_dst[i, k] * layer.a_dst[k]).sum(),
                0.2,
            )
            alpha = torch.softmax(score, dim=0)
            expect = (alpha[:, None] * z_src[nbrs, k]).sum(0)
            torch.testing.assert_close(out[i, k * 4 : (k + 1) * 4], expect)


def test_sampling_keeps_at_most_fanout_real_in_edges() -> None:
    rng = np.random.default_rng(0)
    n = 500
    src, dst = rng.integers(0, n, 6000), rng.integers(0, n, 6000)
    indptr, indices = csc(src, dst, n)
    edges = set(zip(src.tolist(), dst.tolist(), strict=True))
    seeds = np.arange(20)
    inputs, blocks = sample_blocks(seeds, indptr, indices, (4, 3), rng)
    outer, inner = blocks  # input layer first
    assert inner.n_dst == 20 and inner.n_src == outer.n_dst and outer.n_src == len(inputs)
    assert (inputs[:20] == seeds).all()  # destinations come first among the sources
    for block, fanout in ((inner, 4), (outer, 3)):
        per_dst = np.bincount(block.dst.numpy(), minlength=block.n_dst)
        degree = np.diff(indptr)[inputs[: block.n_dst]]
        assert (per_dst == np.minimum(degree, fanout)).all()
        for s, d in zip(block.src.tolist(), block.dst.tolist(), strict=True):
            assert (int(inputs[s]), int(inputs[d])) in edges
    model = GAT(8, 16, 3, layers=2, heads=4)
    out = model(torch.randn(len(inputs), 8), blocks)
    assert out.shape == (20, 3)
