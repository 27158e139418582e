"""A graph attention network in plain PyTorch, on sampled blocks (mini-batch training).

:class:`GATLayer` is one GAT layer (Velickovic et al. 2018) on a bipartite block: ``n_src``
source nodes send messages along ``(src, dst)`` edges to ``n_dst`` destination nodes. Per head
it transforms sources and destinations, scores each edge with ``LeakyReLU(a_src . W h_j +
a_dst . W h_i)``, normalises the scores with a softmax over each destination's in-edges (a
segment softmax: ``scatter_reduce`` max, ``exp``, ``index_add`` sum) and sums the weighted
messages (``index_add``). ``hidden`` is the concatenated width of all heads. :class:`GAT`
stacks layers (ReLU between) and ends in a linear classifier on the seeds.

:func:`sample_blocks` draws the blocks from a CSC graph as DGL's neighbour sampler does: every
destination node keeps all its in-edges when it has at most ``fanout`` of them, else a uniform
sample of ``fanout`` without replacement; the destinations come first among the sources.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F
from torch import nn

IntArray = npt.NDArray[np.int64]


class GATLayer(nn.Module):
    """One GAT layer on a block (module docstring)."""

    def __init__(self, d_in: int, hidden: int, heads: int) -> None:
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
        self.heads, self.per_head = heads, hidden // heads
        self.w_src = nn.Linear(d_in, hidden, bias=False)
        self.w_dst = nn.Linear(d_in, hidden, bias=False)
        self.a_src = nn.Parameter(torch.randn(heads, self.per_head) * 0.1)
        self.a_dst = nn.Parameter(torch.randn(heads, self.per_head) * 0.1)

    def forward(
        self, h_src: torch.Tensor, h_dst: torch.Tensor, src: torch.Tensor, dst: torch.Tensor
    ) -> torch.Tensor:
        n_dst, heads, per = h_dst.shape[0], self.heads, self.per_head
        z_src = self.w_src(h_src).view(-1, heads, per)
        z_dst = self.w_dst(h_dst).view(-1, heads, per)
        score = F.leaky_relu(
            (z_src * self.a_src).sum(-1)[src] + (z_dst * self.a_dst).sum(-1)[dst], 0.2
        )  # E x heads
        index = dst.unsqueeze(1).expand(-1, heads)
        top = torch.full((n_dst, heads), -torch.inf, dtype=score.dtype)
        top = top.scatter_reduce(0, index, score, reduce="amax", include_self=True)
        weight = torch.exp(score - top[dst])
        total = torch.zeros(n_dst, heads, dtype=score.dtype).index_add(0, dst, weight)
        alpha = weight / total[dst].clamp(min=1e-30)
        out = torch.zeros(n_dst, heads, per, dtype=z_src.dtype)
        out = out.index_add(0, dst, z_src[src] * alpha.unsqueeze(-1))
        return out.reshape(n_dst, heads * per)


class GAT(nn.Module):
    """``layers`` GAT layers of width ``hidden`` and a linear classifier on the seeds."""

    def __init__(self, d_in: int, hidden: int, classes: int, layers: int, heads: int) -> None:
        super().__init__()
        widths = [d_in] + [hidden] * (layers - 1)
        self.convs = nn.ModuleList(GATLayer(w, hidden, heads) for w in widths)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor, blocks: Sequence[Block]) -> torch.Tensor:
        h = x
        for i, (conv, block) in enumerate(zip(self.convs, blocks, strict=True)):
            h = conv(h, h[: block.n_dst], block.src, block.dst)
            if i < len(self.convs) - 1:
                h = torch.relu(h)
        return self.out(h)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class Block:
    """One sampled layer: edges ``src -> dst`` in local ids; sources are ``n_src`` nodes whose
    first ``n_dst`` are the destinations."""

    src: torch.Tensor
    dst: torch.Tensor
    n_src: int
    n_dst: int


def csc(src: IntArray, dst: IntArray, nodes: int) -> tuple[IntArray, IntArray]:
    """In-edges by destination: ``indptr`` (nodes + 1) and the sources in that order."""
    order = np.argsort(dst, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=nodes))])
    return indptr.astype(np.int64), src[order].astype(np.int64)


def sample_in_edges(
    frontier: IntArray, indptr: IntArray, indices: IntArray, fanout: int, rng: np.random.Generator
) -> tuple[IntArray, IntArray]:
    """Global (source, destination position) pairs: up to ``fanout`` in-edges per node."""
    deg = indptr[frontier + 1] - indptr[frontier]
    owner = np.repeat(np.arange(len(frontier)), deg)
    start = np.repeat(indptr[frontier], deg)
    offset = np.arange(deg.sum()) - np.repeat(np.cumsum(deg) - deg, deg)
    # a random rank within each node's in-edges keeps ``fanout`` of them uniformly
    key = owner + rng.random(len(owner))
    order = np.argsort(key, kind="stable")
    rank = np.arange(len(order)) - np.repeat(np.cumsum(deg) - deg, deg)
    keep = order[rank < fanout]
    return indices[start[keep] + offset[keep]], owner[keep]


def sample_blocks(
    seeds: IntArray, indptr: IntArray, indices: IntArray, fanouts: Sequence[int],
    rng: np.random.Generator,
) -> tuple[IntArray, list[Block]]:  # fmt: skip
    """Blocks from the input layer to the seeds and the global ids of the input nodes;
    ``fanouts`` from the seeds outwards."""
    blocks: list[Block] = []
    frontier = np.asarray(seeds, dtype=np.int64)
    for fanout in fanouts:
        neighbours, dst_pos = sample_in_edges(frontier, indptr, indices, fanout, rng)
        new = np.setdiff1d(np.unique(neighbours), frontier, assume_unique=False)
        nodes = np.concatenate([frontier, new])
        sorter = np.argsort(nodes, kind="stable")
        src_local = sorter[np.searchsorted(nodes, neighbours, sorter=sorter)]
        blocks.append(
            Block(
                src=torch.from_numpy(src_local),
                dst=torch.from_numpy(dst_pos),
                n_src=len(nodes),
                n_dst=len(frontier),
            )
        )
        frontier = nodes
    return frontier, blocks[::-1]
