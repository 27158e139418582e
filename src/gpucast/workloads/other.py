"""Recommendation, graph and plain MLP workloads: ``dlrm``, ``ncf``, ``gcn``, ``mlp``.

* ``dlrm`` (Naumov et al. 2019): ``dense_features`` continuous inputs through a bottom MLP,
  one embedding-bag (sum of ``lookups`` rows) per table, pairwise dot-product interaction of
  the bottom output and the embeddings (strict lower triangle), concatenated with the bottom
  output and fed to a top MLP ending in one logit; binary cross-entropy. Defaults follow the
  Criteo layout: 13 dense features, 26 tables (10,000 rows each here, ``table_sizes`` to
  change), embedding dimension 64, bottom 512-256-64, top 512-256-1. Dense gradients.
* ``ncf``: NeuMF (He et al. 2017, "Neural Collaborative Filtering") as in guoyang9/NCF's
  ``NeuMF-end``, the NCF job of the Pollux (OSDI'21) traces (``petuum/adaptdl``
  ``examples/NCF``) on MovieLens-1M: 6,040 users, 3,706 items, 32 predictive factors, a GMF
  tower (element-wise product of 32-d embeddings) and an MLP tower (128-d embeddings,
  concatenated, then 3 dropout(0.1)-linear-ReLU layers 256-128-64-32), concatenated into one
  logit: 1,602,657 parameters. Binary cross-entropy; the batch holds the negatives: each
  positive interaction is followed by ``negatives`` (4) sampled ones, as in the reference's
  training set, and every element counts as a sample. (MLPerf's NCF is bigger: MovieLens-20M,
  64 factors, MLP 256-256-128-64.)
* ``gcn`` (Kipf & Welling 2017): two graph convolutions ``A_hat @ (X @ W)`` with ReLU and
  dropout between, on a synthetic random undirected graph whose node count is the batch size;
  ``A_hat`` is the symmetrically normalised adjacency with self loops, a sparse COO tensor
  multiplied with ``torch.sparse.mm``. Defaults are Cora's shapes: 1433 features, 16 hidden,
  7 classes, average degree 4. Every node is labelled (full-batch training).
* ``mlp``: a ReLU multi-layer perceptron; defaults 784-1024-1024-10, cross-entropy.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from gpucast.domain.embeddings import (
    DLRM_EMBEDDING_DIM,
    DLRM_LOOKUPS,
    DLRM_TABLE_ROWS,
    DLRM_TABLES,
)
from gpucast.domain.errors import InvalidSpecError
from gpucast.workloads._options import positive_int, positive_ints, probability, reject_unknown
from gpucast.workloads.base import Batch, Workload


def _mlp_layers(sizes: tuple[int, ...], final_activation: bool) -> list[nn.Module]:
    layers: list[nn.Module] = []
    for index, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(fan_in, fan_out))
        if final_activation or index < len(sizes) - 2:
            layers.append(nn.ReLU())
    return layers


# ---------------------------------------------------------------------------------------------
# DLRM


class DLRM(nn.Module):
    def __init__(
        self,
        *,
        dense_features: int,
        table_sizes: tuple[int, ...],
        embedding_dim: int,
        bottom_mlp: tuple[int, ...],
        top_mlp: tuple[int, ...],
    ) -> None:
        super().__init__()
        self.bottom = nn.Sequential(*_mlp_layers((dense_features, *bottom_mlp), True))
        self.tables = nn.ModuleList(
            nn.EmbeddingBag(rows, embedding_dim, mode="sum") for rows in table_sizes
        )
        features = len(table_sizes) + 1
        interactions = features * (features - 1) // 2
        self.top = nn.Sequential(*_mlp_layers((interactions + embedding_dim, *top_mlp, 1), False))
        # Index pairs of the strict lower triangle, built on the default (context) device.
        rows, cols = torch.tril_indices(features, features, offset=-1)
        self.register_buffer("pair_rows", rows, persistent=False)
        self.register_buffer("pair_cols", cols, persistent=False)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        bottom = self.bottom(dense)
        pooled = [table(sparse[:, index, :]) for index, table in enumerate(self.tables)]
        features = torch.stack([bottom, *(p.to(bottom.dtype) for p in pooled)], dim=1)
        dots = torch.bmm(features, features.transpose(1, 2))
        pairs = dots[:, self.pair_rows, self.pair_cols]
        return self.top(torch.cat([bottom, pairs], dim=1)).squeeze(1)


def dlrm(**options: Any) -> Workload:
    """``dlrm``; options ``table_sizes``, ``embedding_dim``, ``bottom_mlp``, ``top_mlp``,
    ``dense_features``, ``lookups`` (rows summed per table per sample)."""
    reject_unknown(
        "dlrm",
        options,
        ("table_sizes", "embedding_dim", "bottom_mlp", "top_mlp", "dense_features", "lookups"),
    )
    table_sizes = positive_ints(
        "table_sizes", options.get("table_sizes", (DLRM_TABLE_ROWS,) * DLRM_TABLES)
    )
    embedding_dim = positive_int("embedding_dim", options.get("embedding_dim", DLRM_EMBEDDING_DIM))
    bottom_mlp = positive_ints("bottom_mlp", options.get("bottom_mlp", (512, 256, embedding_dim)))
    top_mlp = positive_ints("top_mlp", options.get("top_mlp", (512, 256)))
    dense_features = positive_int("dense_features", options.get("dense_features", 13))
    lookups = positive_int("lookups", options.get("lookups", DLRM_LOOKUPS))
    if bottom_mlp[-1] != embedding_dim:
        raise InvalidSpecError(
            "bottom_mlp",
            "must end in embedding_dim for the dot interaction",
            got=bottom_mlp,
            fix=f"end bottom_mlp with {embedding_dim}",
        )

    def build_model(device: torch.device) -> nn.Module:
        with torch.device(device):
            return DLRM(
                dense_features=dense_features,
                table_sizes=table_sizes,
                embedding_dim=embedding_dim,
                bottom_mlp=bottom_mlp,
                top_mlp=top_mlp,
            )

    def make_batch(batch_size: int, device: torch.device) -> Batch:
        dense = torch.rand(batch_size, dense_features, device=device)
        high = torch.tensor(table_sizes, device=device).view(1, -1, 1)
        unit = torch.rand(batch_size, len(table_sizes), lookups, device=device)
        sparse = (unit * high).long().clamp_(max=high - 1)  # row < table size, per table
        clicks = (torch.rand(batch_size, device=device) < 0.5).float()
        return (dense, sparse), clicks

    def loss(logits: torch.Tensor, clicks: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(logits, clicks.to(logits.dtype))

    return Workload(
        name="dlrm",
        family="recommendation",
        sample_unit="samples",
        build_model=build_model,
        make_batch=make_batch,
        loss=loss,
        description=f"DLRM, {len(table_sizes)} tables x dim {embedding_dim}, dot interaction",
        options={
            "table_sizes": table_sizes,
            "embedding_dim": embedding_dim,
            "bottom_mlp": bottom_mlp,
            "top_mlp": top_mlp,
            "dense_features": dense_features,
            "lookups": lookups,
        },
    )


# ---------------------------------------------------------------------------------------------
# GCN


class _SymmetricSparseMatmul(torch.autograd.Function):
    """``A @ h`` for a symmetric sparse ``A``, whose input gradient is ``A @ grad`` again.

    Spelling the backward out (instead of autograd's ``A.t() @ grad``) keeps it one sparse
    matmul with the same non-zeros, which fake-tensor profiling can also see (a fake sparse
    transpose loses its non-zero count).
    """

    @staticmethod
    def forward(ctx: Any, adjacency: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(adjacency)
        return torch.sparse.mm(adjacency, h)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, torch.Tensor]:
        (adjacency,) = ctx.saved_tensors
        return None, torch.sparse.mm(adjacency, grad.to(adjacency.dtype))


class GCN(nn.Module):
    def __init__(self, in_features: int, hidden: int, num_classes: int, dropout: float) -> None:
        super().__init__()
        self.linear1 = nn.Linear(in_features, hidden, bias=False)
        self.linear2 = nn.Linear(hidden, num_classes, bias=False)
        self.dropout = nn.Dropout(dropout)

    @staticmethod
    def _propagate(adjacency: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        # Sparse kernels are fp32-only on some devices, and autocast's cast around
        # ``sparse.mm`` breaks its backward on CPU: aggregate in the adjacency's dtype, outside
        # autocast.
        with torch.autocast(h.device.type, enabled=False):
            out: torch.Tensor = _SymmetricSparseMatmul.apply(adjacency, h.to(adjacency.dtype))
            return out

    def forward(self, features: torch.Tensor, adjacency: torch.Tensor) -> torch.Tensor:
        h = self._propagate(adjacency, self.linear1(self.dropout(features)))
        h = self.dropout(F.relu(h))
        return self._propagate(adjacency, self.linear2(h))


def normalized_random_adjacency(
    num_nodes: int, avg_degree: int, device: torch.device
) -> torch.Tensor:
    """``D^-1/2 (A + I) D^-1/2`` of a random undirected graph, as a sparse COO tensor.

    ``num_nodes * avg_degree // 2`` random edges, each stored in both directions, plus self
    loops: ``2 * (num_nodes * avg_degree // 2) + num_nodes`` non-zeros, symmetric. Built only
    with shape-static operations so that it also works on ``meta`` and fake devices.
    """
    edges = num_nodes * avg_degree // 2
    src = torch.randint(0, num_nodes, (edges,), device=device)
    dst = torch.randint(0, num_nodes, (edges,), device=device)
    loops = torch.arange(num_nodes, device=device)
    rows, cols = torch.cat([dst, src, loops]), torch.cat([src, dst, loops])
    degree = torch.zeros(num_nodes, device=device).index_add_(
        0, rows, torch.ones(rows.shape[0], device=device)
    )
    scale = degree.rsqrt()
    values = scale[rows] * scale[cols]
    return torch.sparse_coo_tensor(
        torch.stack([rows, cols]), values, (num_nodes, num_nodes), check_invariants=False
    )


def gcn(**options: Any) -> Workload:
    """``gcn``: batch size = nodes; options ``in_features``, ``hidden``, ``num_classes``,
    ``avg_degree``, ``dropout``."""
    reject_unknown(
        "gcn", options, ("in_features", "hidden", "num_classes", "avg_degree", "dropout")
    )
    in_features = positive_int("in_features", options.get("in_features", 1433))
    hidden = positive_int("hidden", options.get("hidden", 16))
    num_classes = positive_int("num_classes", options.get("num_classes", 7))
    avg_degree = positive_int("avg_degree", options.get("avg_degree", 4))
    dropout = probability("dropout", options.get("dropout", 0.5))

    def build_model(device: torch.device) -> nn.Module:
        with torch.device(device):
            return GCN(in_features, hidden, num_classes, dropout)

    def make_batch(batch_size: int, device: torch.device) -> Batch:
        features = torch.rand(batch_size, in_features, device=device)
        adjacency = normalized_random_adjacency(batch_size, avg_degree, device)
        labels = torch.randint(0, num_classes, (batch_size,), device=device)
        return (features, adjacency), labels

    def loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, labels)

    return Workload(
        name="gcn",
        family="graph",
        sample_unit="nodes",
        build_model=build_model,
        make_batch=make_batch,
        loss=loss,
        description=f"2-layer GCN {in_features}-{hidden}-{num_classes}, avg degree {avg_degree}",
        options={
            "in_features": in_features,
            "hidden": hidden,
            "num_classes": num_classes,
            "avg_degree": avg_degree,
            "dropout": dropout,
        },
    )


# ---------------------------------------------------------------------------------------------
# MLP


def mlp(**options: Any) -> Workload:
    """``mlp``; options ``in_features`` (784), ``hidden`` (1024,1024), ``num_classes`` (10)."""
    reject_unknown("mlp", options, ("in_features", "hidden", "num_classes"))
    in_features = positive_int("in_features", options.get("in_features", 784))
    hidden = positive_ints("hidden", options.get("hidden", (1024, 1024)), min_len=0)
    num_classes = positive_int("num_classes", options.get("num_classes", 10))
    sizes = (in_features, *hidden, num_classes)

    def build_model(device: torch.device) -> nn.Module:
        with torch.device(device):
            return nn.Sequential(*_mlp_layers(sizes, False))

    def make_batch(batch_size: int, device: torch.device) -> Batch:
        inputs = torch.randn(batch_size, in_features, device=device)
        return (inputs,), torch.randint(0, num_classes, (batch_size,), device=device)

    def loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, labels)

    return Workload(
        name="mlp",
        family="mlp",
        sample_unit="samples",
        build_model=build_model,
        make_batch=make_batch,
        loss=loss,
        description="MLP " + "-".join(str(s) for s in sizes) + " with ReLU",
        options={"in_features": in_features, "hidden": hidden, "num_classes": num_classes},
    )


# ---------------------------------------------------------------------------------------------
# NCF (NeuMF)


class NeuMF(nn.Module):
    """GMF and MLP towers over separate embeddings, concatenated into one logit.

    GMF: the element-wise product of ``factors``-dimensional user and item embeddings. MLP:
    ``factors * 2**(layers-1)``-dimensional embeddings, concatenated, through ``layers``
    dropout + linear + ReLU layers that halve the width down to ``factors``.
    """

    def __init__(self, *, users: int, items: int, factors: int, layers: int, dropout: float):
        super().__init__()
        mlp_dim = factors * 2 ** (layers - 1)
        self.user_gmf = nn.Embedding(users, factors)
        self.item_gmf = nn.Embedding(items, factors)
        self.user_mlp = nn.Embedding(users, mlp_dim)
        self.item_mlp = nn.Embedding(items, mlp_dim)
        tower: list[nn.Module] = []
        for index in range(layers):
            width = factors * 2 ** (layers - index)
            tower += [nn.Dropout(dropout), nn.Linear(width, width // 2), nn.ReLU()]
        self.mlp = nn.Sequential(*tower)
        self.predict = nn.Linear(2 * factors, 1)
        for embedding in (self.user_gmf, self.item_gmf, self.user_mlp, self.item_mlp):
            nn.init.normal_(embedding.weight, std=0.01)

    def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        gmf = self.user_gmf(users) * self.item_gmf(items)
        mlp = self.mlp(torch.cat([self.user_mlp(users), self.item_mlp(items)], dim=-1))
        return self.predict(torch.cat([gmf, mlp], dim=-1)).squeeze(-1)


MOVIELENS_1M_USERS = 6040
MOVIELENS_1M_ITEMS = 3706


def ncf(**options: Any) -> Workload:
    """``ncf`` (NeuMF-end); options ``factors`` (32), ``layers`` (3), ``dropout`` (0.1),
    ``users`` (6,040), ``items`` (3,706), ``negatives`` (4 sampled per positive)."""
    reject_unknown("ncf", options, ("factors", "layers", "dropout", "users", "items", "negatives"))
    factors = positive_int("factors", options.get("factors", 32))
    layers = positive_int("layers", options.get("layers", 3))
    dropout = probability("dropout", options.get("dropout", 0.1))
    users = positive_int("users", options.get("users", MOVIELENS_1M_USERS))
    items = positive_int("items", options.get("items", MOVIELENS_1M_ITEMS))
    negatives = options.get("negatives", 4)
    if isinstance(negatives, bool) or not isinstance(negatives, int) or negatives < 0:
        raise InvalidSpecError("negatives", "must be an integer >= 0", got=negatives)

    def build_model(device: torch.device) -> nn.Module:
        with torch.device(device):
            return NeuMF(users=users, items=items, factors=factors, layers=layers, dropout=dropout)

    def make_batch(batch_size: int, device: torch.device) -> Batch:
        user_ids = torch.randint(0, users, (batch_size,), device=device)
        item_ids = torch.randint(0, items, (batch_size,), device=device)
        # One observed interaction, then ``negatives`` sampled unobserved items, repeating.
        labels = (torch.arange(batch_size, device=device) % (negatives + 1) == 0).float()
        return (user_ids, item_ids), labels

    def loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))

    return Workload(
        name="ncf",
        family="recommendation",
        sample_unit="samples",
        build_model=build_model,
        make_batch=make_batch,
        loss=loss,
        description=f"NeuMF, {users} users x {items} items, {factors} factors, "
        f"{layers}-layer MLP, {negatives} negatives per positive",
        options={
            "factors": factors,
            "layers": layers,
            "dropout": dropout,
            "users": users,
            "items": items,
            "negatives": negatives,
        },
    )
