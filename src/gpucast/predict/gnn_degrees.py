"""Degree distributions for GNN pricing: neighbour sampling and random halos from the degrees.

Without a distribution the GNN models put every node at the mean degree ``E / N``
(:func:`gpucast.predict.gnn.sampled_nodes`); on a skewed (power-law) graph that overstates the
neighbours a node can give (``min(D, f)`` is concave in ``D``) and ignores that sampled edges
land on hubs again and again. A :class:`DegreeDistribution` groups the nodes by degree class --
``count`` nodes with ``in_degree`` in-edges (the neighbours a node can sample) and
``out_degree`` out-edges (how often a sampled edge lands on it); in = out for a graph stored
with both directions -- and comes from:

* :func:`powerlaw` -- ``powerlaw:ALPHA``: ``p(d) ~ d^-ALPHA`` on ``k..N-1`` with the lowest
  degree ``k`` holding only part of its share, ``k`` and that part solved so the mean is
  ``E / N`` (degrees above :data:`EXPLICIT_DEGREES` in geometric bins of ratio
  :data:`BIN_RATIO`, each at its mean degree);
* :func:`histogram` -- a ``degree,count`` histogram;
* :func:`from_sequences` -- the in- and out-degree of every node (an edge list).

:func:`sampled_hops` is the mini-batch sampler of the GNN models (DGL's blocks: at hop ``l``
every node reached so far draws ``min(in-degree, f_l)`` distinct in-neighbours) in
expectation. A draw follows an edge, so it lands on node ``u`` with probability
``out_u / E``: after ``K`` draws ``u`` is reached with probability ``1 - (1 - out_u / E)^K``,
and a seed (``B`` of the ``N`` nodes, uniform) it is anyway, so
``P(u in hop l) = 1 - (1 - B / N)(1 - out_u / E)^{K_l}``. The distinct nodes up to hop ``l``
are the sum of these over the nodes, the edges sampled at hop ``l + 1`` the sum of
``P(u in hop l) min(in_u, f_{l+1})``, and ``K_{l+1} = K_l`` plus those edges. The seeds' hop
so sees the plain degree distribution and later hops the size-biased one
(``d p(d) / mean``: ``1 - (1 - d / E)^K ~ K d / E`` while few draws are made), with hubs
counted once however often they are drawn. Left out: a node's repeated draws of its own
neighbours at later hops (the blocks resample every node reached) and the edge back to the
node that reached it land on nodes already in the batch more often than a fresh draw would.

A heterogeneous graph (R-GAT) samples per relation (:func:`sampled_relations`): each relation
``r`` (source type -> destination type) has its destination nodes' in-degrees and its source
nodes' out-degrees along it (:class:`RelationDegrees`, from :func:`relation_degrees`: a power
law or every node at the relation's mean); the reached destination nodes draw along ``r``,
the draws land on its source nodes by their out-degree along ``r``, and a node reached along
several relations (or a seed) counts once -- the relations taken as independent of each
other. The homogeneous :func:`sampled_hops` is the case of one type and one relation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError

FloatArray = npt.NDArray[np.float64]
#: ``powerlaw:ALPHA``: the exponents taken (a degree exponent of real graphs is 2-3.5).
MIN_ALPHA, MAX_ALPHA = 1.0, 10.0
#: Power-law degrees kept one by one up to this; above it, geometric bins of this ratio.
EXPLICIT_DEGREES = 10_000
BIN_RATIO = 1.001
#: The largest mean degree a power law is built for (its degrees are listed up to 2x it).
MAX_POWERLAW_MEAN = 10_000_000
POWERLAW = "powerlaw:"


def _array(name: str, values: npt.ArrayLike) -> FloatArray:
    out = np.asarray(values, dtype=np.float64)
    if out.ndim != 1 or not np.isfinite(out).all() or (out < 0).any():
        raise InvalidSpecError(name, "must be a 1-D array of finite numbers >= 0")
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class DegreeDistribution:
    """Nodes by degree class (module docstring); ``name`` says where it came from."""

    name: str
    in_degree: FloatArray
    out_degree: FloatArray
    count: FloatArray

    def __post_init__(self) -> None:
        arrays = [_array(n, getattr(self, n)) for n in ("in_degree", "out_degree", "count")]
        if len({a.shape for a in arrays}) != 1 or arrays[0].size == 0:
            raise InvalidSpecError("degrees", "in_degree, out_degree and count need one row each")
        if arrays[2].sum() <= 0:
            raise InvalidSpecError("degrees", "needs at least one node")
        ins, outs = (float((a * arrays[2]).sum()) for a in arrays[:2])
        if abs(ins - outs) > 1e-9 * max(ins, outs):
            raise InvalidSpecError(
                "degrees", "in- and out-degrees must sum to the same edges", got=(ins, outs)
            )

    @property
    def nodes(self) -> float:
        return float(self.count.sum())

    @property
    def edges(self) -> float:
        """Directed edges: the in-degrees summed (the out-degrees give the same)."""
        return float((self.in_degree * self.count).sum())

    @property
    def mean_degree(self) -> float:
        return self.edges / self.nodes

    def max_degree(self) -> float:
        return float(self.in_degree.max())


def histogram(degree: npt.ArrayLike, count: npt.ArrayLike, *, name: str) -> DegreeDistribution:
    """``count[i]`` nodes of degree ``degree[i]``, in = out (both directions stored)."""
    d = _array("degree", degree)
    return DegreeDistribution(name=name, in_degree=d, out_degree=d, count=_array("count", count))


def from_sequences(
    in_degree: npt.ArrayLike, out_degree: npt.ArrayLike, *, name: str
) -> DegreeDistribution:
    """Every node's in- and out-degree (integers), grouped into the distinct (in, out) pairs."""
    i = _array("in_degree", in_degree).astype(np.int64)
    o = _array("out_degree", out_degree).astype(np.int64)
    if i.shape != o.shape or i.size == 0:
        raise InvalidSpecError("degrees", "needs an in- and an out-degree for every node")
    width = int(o.max()) + 1
    key, count = np.unique(i * width + o, return_counts=True)
    return DegreeDistribution(
        name=name,
        in_degree=(key // width).astype(np.float64),
        out_degree=(key % width).astype(np.float64),
        count=count.astype(np.float64),
    )


def _power_integral(lo: FloatArray, hi: FloatArray, power: float) -> FloatArray:
    """``integral of x^power`` from ``lo`` to ``hi`` (elementwise), stable near ``power = -1``."""
    p1 = power + 1.0
    log_ratio = np.log(hi / lo)
    if abs(p1) < 1e-12:
        return log_ratio
    return np.exp(p1 * np.log(lo)) * np.expm1(p1 * log_ratio) / p1


def _support(alpha: float, d_max: int, explicit: int) -> tuple[FloatArray, FloatArray]:
    """Degrees and their relative weight ``d^-alpha``: one by one up to ``explicit``, then
    geometric bins (each at its mean degree, weighted by the integral over it)."""
    ints = np.arange(1, explicit + 1, dtype=np.float64)
    degree, weight = [ints], [np.exp(-alpha * np.log(ints))]
    if d_max > explicit:
        lo_edge, hi_edge = explicit + 0.5, d_max + 0.5
        bins = max(1, math.ceil(math.log(hi_edge / lo_edge) / math.log(BIN_RATIO)))
        edges = np.geomspace(lo_edge, hi_edge, bins + 1)
        lo, hi = edges[:-1], edges[1:]
        mass = _power_integral(lo, hi, -alpha)
        degree.append(_power_integral(lo, hi, 1.0 - alpha) / mass)
        weight.append(mass)
    return np.concatenate(degree), np.concatenate(weight)


def _min_degree_means(alpha: float, d_max: int, explicit: int) -> tuple[FloatArray, ...]:
    """The support, its weights, and the mean degree when the law starts at each degree
    ``1..explicit`` (suffix sums: the mean grows with the start)."""
    degree, weight = _support(alpha, d_max, explicit)
    s0 = np.cumsum(weight[::-1])[::-1]
    s1 = np.cumsum((weight * degree)[::-1])[::-1]
    return degree, weight, s0[:explicit], s1[:explicit] / s0[:explicit]


def _smallest_alpha(mean: float, d_max: int, explicit: int) -> float:
    """The exponent at which a law starting at degree 1 has mean ``mean`` (bisection)."""
    lo, hi = MIN_ALPHA + 1e-9, MAX_ALPHA
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if _min_degree_means(mid, d_max, explicit)[3][0] > mean:
            lo = mid
        else:
            hi = mid
    return hi


def parse_powerlaw(text: str, field: str) -> float | None:
    """ALPHA of ``powerlaw:ALPHA`` (bad ALPHA: an :class:`InvalidSpecError` on ``field``);
    None when ``text`` is not one."""
    if not text.strip().lower().startswith(POWERLAW):
        return None
    raw = text.strip()[len(POWERLAW) :].strip()
    try:
        alpha = float(raw)
    except ValueError:
        alpha = math.nan
    if not (math.isfinite(alpha) and MIN_ALPHA < alpha <= MAX_ALPHA):
        raise InvalidSpecError(
            field, f"powerlaw:ALPHA needs a number {MIN_ALPHA:g} < ALPHA <= {MAX_ALPHA:g} (the "
            "degree exponent; at 1 or below the law has no finite mean)", got=text,
            fix="e.g. powerlaw:2.1 (real graphs: 2-3.5)",
        )  # fmt: skip
    return alpha


def powerlaw(alpha: float, *, nodes: int, edges: int) -> DegreeDistribution:
    """``powerlaw:ALPHA`` on ``nodes`` nodes with mean degree ``edges / nodes`` (module
    docstring)."""
    if not (isinstance(alpha, int | float) and math.isfinite(alpha)) or not (
        MIN_ALPHA < alpha <= MAX_ALPHA
    ):
        raise InvalidSpecError(
            "degrees", f"powerlaw:ALPHA needs {MIN_ALPHA:g} < ALPHA <= {MAX_ALPHA:g}", got=alpha,
            fix="e.g. powerlaw:2.1 (real graphs: 2-3.5)",
        )  # fmt: skip
    if isinstance(nodes, bool) or nodes < 2 or isinstance(edges, bool) or edges < 1:
        raise InvalidSpecError(
            "degrees", "powerlaw needs --nodes >= 2 and --edges >= 1", got=(nodes, edges)
        )
    mean, d_max = edges / nodes, nodes - 1
    if mean < 1.0:
        raise InvalidSpecError(
            "degrees", f"powerlaw:ALPHA starts at degree 1: the mean degree ({mean:.3g} = "
            "--edges / --nodes) must be >= 1", fix="give a histogram (--degrees FILE) instead",
        )  # fmt: skip
    if mean > min(d_max, MAX_POWERLAW_MEAN):
        raise InvalidSpecError(
            "degrees", f"a mean degree of {mean:,.4g} is more than a power law over "
            f"{nodes:,} nodes takes (max {min(d_max, MAX_POWERLAW_MEAN):,})",
            fix="check --nodes and --edges",
        )  # fmt: skip
    explicit = min(d_max, max(EXPLICIT_DEGREES, 2 * math.ceil(mean)))
    degree, weight, s0, means = _min_degree_means(alpha, d_max, explicit)
    if means[0] > mean * (1 + 1e-12):
        need = _smallest_alpha(mean, d_max, explicit)
        raise InvalidSpecError(
            "degrees", f"powerlaw:{alpha:g} over {nodes:,} nodes has a mean degree of at least "
            f"{means[0]:,.4g} (every node >= 1), above the {mean:,.4g} of --edges / --nodes",
            fix=f"use ALPHA >= {math.ceil(need * 100) / 100:g} for this mean degree",
        )  # fmt: skip
    k = int(np.searchsorted(means, mean, side="right")) - 1  # means[k] <= mean < means[k + 1]
    if k + 1 >= len(means) or means[k] == mean:
        share = 1.0
    else:
        share = (means[k + 1] - mean) / (means[k + 1] - means[k])
    p = np.zeros_like(weight)
    p[k:] += share * weight[k:] / s0[k]
    if share < 1.0:
        p[k + 1 :] += (1.0 - share) * weight[k + 1 :] / s0[k + 1]
    keep = p > 0
    at_min = p[k] * 100
    name = (
        f"powerlaw:{alpha:g} (p(d) ~ d^-{alpha:g} for d = {k + 1}..{d_max:,}; {at_min:.3g}% of "
        f"the nodes at degree {k + 1}, set so the mean is {mean:,.4g})"
    )
    return histogram(degree[keep], nodes * p[keep], name=name)


@dataclass(frozen=True, slots=True, kw_only=True)
class RelationDegrees:
    """One relation's degrees for sampling: ``into`` groups the destination type's nodes by
    their in-degree along it (the neighbours they can sample), ``out_of`` the source type's
    nodes by their out-degree along it (how often a draw lands on them). ``into is out_of``
    (:attr:`joint`) for a relation within one node type whose nodes carry both degrees at once,
    as a homogeneous graph does; otherwise the two sides are independent."""

    src: int
    dst: int
    into: DegreeDistribution
    out_of: DegreeDistribution

    def __post_init__(self) -> None:
        ins, outs = self.into.edges, self.out_of.edges
        if abs(ins - outs) > 1e-9 * max(ins, outs):
            raise InvalidSpecError(
                "degrees", "a relation's in- and out-degrees must sum to the same edges",
                got=(ins, outs),
            )  # fmt: skip
        if self.joint and self.src != self.dst:
            raise InvalidSpecError("degrees", "one law for both ends needs src == dst")

    @property
    def joint(self) -> bool:
        return self.into is self.out_of


def relation_degrees(
    *, src: int, dst: int, nodes_src: int, nodes_dst: int, edges: int,
    in_alpha: float | None = None, out_alpha: float | None = None,
) -> RelationDegrees:  # fmt: skip
    """A relation's sides from its laws (``powerlaw:ALPHA`` exponents; None: every node at the
    mean degree along it). No ``out_alpha`` with an ``in_alpha`` within one node type: the
    same law on the same nodes (:attr:`RelationDegrees.joint`, in = out as ``--degrees``);
    across two types: the source side at its mean (uniform draws). A bad law is an
    :class:`InvalidSpecError` on field ``in_degree`` or ``out_degree``."""

    def side(alpha: float | None, nodes: int, field: str) -> DegreeDistribution:
        if alpha is None:
            return histogram([edges / nodes], [nodes], name="mean")
        if edges < nodes:
            raise InvalidSpecError(
                field, f"powerlaw:ALPHA starts at degree 1: the mean degree along the relation "
                f"({edges / nodes:.3g} = {edges:,} edges / {nodes:,} nodes) must be >= 1",
                fix="leave it empty (every node at the mean)",
            )  # fmt: skip
        try:
            return powerlaw(alpha, nodes=nodes, edges=edges)
        except InvalidSpecError as exc:
            why = exc.message.removeprefix("degrees: ").replace(
                "--edges / --nodes", "edges / nodes"
            )
            raise InvalidSpecError(field, why, fix=exc.fix) from exc

    into = side(in_alpha, nodes_dst, "in_degree")
    if out_alpha is None and in_alpha is not None and src == dst:
        return RelationDegrees(src=src, dst=dst, into=into, out_of=into)
    return RelationDegrees(
        src=src, dst=dst, into=into, out_of=side(out_alpha, nodes_src, "out_degree")
    )


def _log_miss(side: DegreeDistribution) -> FloatArray:
    """``log(1 - out_u / E)`` per class: the log of one draw missing a node of the class."""
    e = side.edges
    if e <= 0:
        return np.zeros(len(side.count))
    with np.errstate(divide="ignore"):  # a node holding every edge: it is always reached
        return np.log1p(-np.minimum(side.out_degree / e, 1.0))


def sampled_relations(
    counts: npt.ArrayLike, relations: Sequence[RelationDegrees], seeds: npt.ArrayLike,
    fanouts: Sequence[float],
) -> tuple[FloatArray, FloatArray]:  # fmt: skip
    """Expected distinct nodes per type up to each hop (``(L+1, T)``, seeds first) and sampled
    edges per hop and relation (``(L, R)``) of a heterogeneous graph: :func:`sampled_hops`
    per relation (module docstring). At each hop every node of a relation's destination type
    reached so far draws ``min(in-degree, f)`` in-neighbours along it; ``K_r`` draws along
    ``r`` miss a source node ``u`` with probability ``(1 - out_u / E_r)^{K_r}``, and a node is
    missed by every relation out of its type (and by the seeds, ``seeds[t]`` of the type's
    nodes, uniform) at once: ``P(reached) = 1 - (1 - B_t / N_t) prod_r (1 - p_r)``. Sides are
    independent of each other unless they are the same :class:`DegreeDistribution` object:
    those are the same nodes, each class carrying its degrees along all of them (a relation
    within one type, in = out; a relation and its reverse)."""
    n = np.asarray(counts, dtype=np.float64)
    seed = np.asarray(seeds, dtype=np.float64)
    for r in relations:
        if abs(r.into.nodes - n[r.dst]) > 1e-9 * n[r.dst] or (
            abs(r.out_of.nodes - n[r.src]) > 1e-9 * n[r.src]
        ):
            raise InvalidSpecError("degrees", "a relation's sides must cover their node types")
    seed_miss = 1.0 - np.minimum(seed, n) / n
    # the sources' sides, each once: (distribution, node type, relations landing on it)
    groups: dict[int, tuple[DegreeDistribution, int, list[int]]] = {}
    for i, r in enumerate(relations):
        groups.setdefault(id(r.out_of), (r.out_of, r.src, []))[2].append(i)
    log_miss = [_log_miss(r.out_of) for r in relations]
    draws = np.zeros(len(relations))
    nodes, edges = [np.minimum(seed, n)], []

    def missed() -> tuple[dict[int, FloatArray], dict[int, float]]:
        """Per side: the share of each class missed so far by the draws onto it, its mean."""
        per_class = {
            key: np.exp(sum((draws[i] * log_miss[i] for i in rels if draws[i] > 0),
                            np.zeros(len(dist.count))))
            for key, (dist, _, rels) in groups.items()
        }  # fmt: skip
        return per_class, {
            key: float((groups[key][0].count * m).sum()) / n[groups[key][1]]
            for key, m in per_class.items()
        }

    def type_miss(mean: dict[int, float], skip: int = 0) -> FloatArray:
        """Per type: missed by the seeds and every side out of it (but side ``skip``)."""
        out = seed_miss.copy()
        for key, (_, t, _) in groups.items():
            if key != skip:
                out[t] *= mean[key]
        return out

    for f in fanouts:
        per_class, mean = missed()
        everywhere = type_miss(mean)
        hop = np.zeros(len(relations))
        for i, r in enumerate(relations):
            cap = r.into.count * np.minimum(r.into.in_degree, f)
            key = id(r.into)
            if key in groups:  # the destinations are a side drawn onto: class by class
                miss = type_miss(mean, skip=key)[r.dst] * per_class[key]
                hop[i] = float((cap * (1.0 - miss)).sum())
            else:
                hop[i] = float(cap.sum()) * (1.0 - everywhere[r.dst])
        draws += hop
        nodes.append(np.maximum(nodes[-1], n * (1.0 - type_miss(missed()[1]))))
        edges.append(hop)
    return np.array(nodes), np.array(edges).reshape(len(fanouts), len(relations))


def sampled_hops(
    dist: DegreeDistribution, batch: int, fanouts: Sequence[float]
) -> tuple[list[float], list[float]]:
    """Expected distinct nodes up to each hop (seeds first) and sampled edges at each hop
    (module docstring): one node type, one relation."""
    if isinstance(batch, bool) or batch < 1:
        raise InvalidSpecError("batch", "must be an integer >= 1", got=batch)
    one = RelationDegrees(src=0, dst=0, into=dist, out_of=dist)
    nodes, edges = sampled_relations([dist.nodes], [one], [batch], fanouts)
    return nodes[:, 0].tolist(), edges[:, 0].tolist()
