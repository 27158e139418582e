"""Degree distributions: the power law's parameterisation, the sampled hops against exact
expectations and Monte Carlo runs of the sampler, and the random halo."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.predict import gnn, gnn_degrees, gnn_partition

#: A Monte Carlo mean is within this many standard errors of its expectation.
Z = 4.0


def _skewed(nodes: int, seed: int = 0) -> np.ndarray:
    """A heavy-tailed degree sequence (Pareto, capped at nodes - 1)."""
    rng = np.random.default_rng(seed)
    return np.minimum(np.floor(2 * (rng.pareto(1.2, nodes) + 1)), nodes - 1).astype(np.int64)


# -- powerlaw:ALPHA --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("alpha", "nodes", "edges"),
    [(2.1, 100_000, 2_000_000), (2.7, 100_000, 2_000_000), (2.0, 2_449_029, 123_718_280),
     (3.0, 547_306_935, 5_812_005_639), (9.5, 1000, 3000)],
)  # fmt: skip
def test_powerlaw_has_the_nodes_and_the_mean_degree(alpha: float, nodes: int, edges: int) -> None:
    d = gnn_degrees.powerlaw(alpha, nodes=nodes, edges=edges)
    assert d.nodes == pytest.approx(nodes, rel=1e-12)
    assert d.mean_degree == pytest.approx(edges / nodes, rel=1e-9)
    assert d.max_degree() <= nodes - 1 and d.in_degree.min() >= 1
    assert len(d.count) < 40_000  # binned above EXPLICIT_DEGREES, even for 547M nodes
    assert f"powerlaw:{alpha:g}" in d.name


def test_powerlaw_shape_is_d_to_the_minus_alpha() -> None:
    """Above the lowest degree each count is ``d^-alpha`` times one constant; in the binned
    tail the share of nodes above x falls as ``x^(1 - alpha)`` (less the part beyond the cap
    at ``N - 1``)."""
    alpha, n = 2.5, 1_000_000
    d = gnn_degrees.powerlaw(alpha, nodes=n, edges=10_000_000)
    explicit = (d.in_degree <= gnn_degrees.EXPLICIT_DEGREES) & (d.in_degree > d.in_degree[0])
    constant = d.count[explicit] * d.in_degree[explicit] ** alpha
    assert constant == pytest.approx(np.full(explicit.sum(), constant[0]), rel=1e-9)

    def above(x: float) -> float:
        return float(d.count[d.in_degree > x].sum())

    def tail(x: float) -> float:
        return x ** (1 - alpha) - (n - 0.5) ** (1 - alpha)

    assert above(1e5) / above(1e4) == pytest.approx(tail(1e5) / tail(1e4), rel=0.01)


def test_powerlaw_bad_exponents() -> None:
    for alpha in (1.0, 0.5, 10.5, math.nan):
        with pytest.raises(InvalidSpecError, match="1 < ALPHA <= 10"):
            gnn_degrees.powerlaw(alpha, nodes=1000, edges=5000)
    # a law this heavy starting at degree 1 has a mean far above 5: the smallest ALPHA named
    with pytest.raises(InvalidSpecError, match=r"use ALPHA >= (\d\.\d+)") as err:
        gnn_degrees.powerlaw(1.2, nodes=100_000, edges=500_000)
    need = float(str(err.value).split("ALPHA >= ")[1].split(" ")[0])
    gnn_degrees.powerlaw(need, nodes=100_000, edges=500_000)
    with pytest.raises(InvalidSpecError):
        gnn_degrees.powerlaw(need - 0.02, nodes=100_000, edges=500_000)
    with pytest.raises(InvalidSpecError, match="mean degree"):
        gnn_degrees.powerlaw(2.0, nodes=10, edges=200)  # mean 20 > 9 neighbours
    with pytest.raises(InvalidSpecError, match="must be >= 1"):
        gnn_degrees.powerlaw(2.0, nodes=10, edges=5)  # below the law's least degree


# -- the sampled hops -------------------------------------------------------------------------
def test_first_hop_edges_are_exact() -> None:
    """Seeds are uniform: the edges of hop 1 are ``B`` times the mean of ``min(d, f)``."""
    deg = _skewed(3000)
    dist = gnn_degrees.from_sequences(deg, deg, name="t")
    _, edges = gnn_degrees.sampled_hops(dist, 100, (7, 3))
    assert edges[0] == pytest.approx(100 * np.minimum(deg, 7).mean(), rel=1e-12)


def _ideal_sampler(
    in_deg: np.ndarray, out_deg: np.ndarray, batch: int, fanouts: tuple[int, ...], runs: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The process the model takes expectations of: every node reached draws ``min(in, f)``
    times, each draw landing on ``v`` with probability ``out_v / E``."""
    rng = np.random.default_rng(seed)
    n, p = len(in_deg), out_deg / out_deg.sum()
    nodes, edges = [], []
    for _ in range(runs):
        reached = np.zeros(n, dtype=bool)
        reached[rng.choice(n, batch, replace=False)] = True
        hop_nodes, hop_edges = [batch], []
        for f in fanouts:
            k = int(np.minimum(in_deg[reached], f).sum())
            reached[rng.choice(n, k, p=p)] = True
            hop_nodes.append(int(reached.sum()))
            hop_edges.append(k)
        nodes.append(hop_nodes)
        edges.append(hop_edges)
    return np.array(nodes, dtype=float), np.array(edges, dtype=float)


def _within(predicted: list[float], runs: np.ndarray) -> None:
    se = runs.std(axis=0, ddof=1) / math.sqrt(len(runs))
    assert (np.abs(np.array(predicted) - runs.mean(axis=0)) <= Z * se + 1e-9).all()


def test_first_hop_nodes_match_the_process_exactly() -> None:
    """With every in-degree >= the fan-out the first hop draws exactly ``B f`` times, so the
    expected distinct nodes ``sum_u 1 - (1 - B/N)(1 - out_u/E)^(B f)`` are exact; the
    out-degrees (where draws land) are skewed."""
    out = _skewed(2000, seed=1)
    spare = np.random.default_rng(4).multinomial(int(out.sum()) - 6 * 2000, np.full(2000, 1 / 2000))
    in_deg = 6 + spare  # every node >= 6, the same edges
    dist = gnn_degrees.DegreeDistribution(
        name="t", in_degree=in_deg.astype(float), out_degree=out.astype(float),
        count=np.ones(2000),
    )  # fmt: skip
    hops, _ = gnn_degrees.sampled_hops(dist, 50, (6,))
    nodes, _ = _ideal_sampler(in_deg, out, 50, (6,), runs=500, seed=2)
    _within(hops[:2], nodes)


def test_hops_match_a_monte_carlo_of_the_process() -> None:
    """Later hops plug the expected draws into a concave function (a bias of order
    ``(d/E)^2 Var(K)``, below the Monte Carlo's standard error at this size)."""
    deg = _skewed(2000)
    dist = gnn_degrees.from_sequences(deg, deg, name="t")
    hops, edges = gnn_degrees.sampled_hops(dist, 64, (5, 3, 2))
    nodes, drawn = _ideal_sampler(deg, deg, 64, (5, 3, 2), runs=400, seed=3)
    _within(hops, nodes)
    _within(edges, drawn)


def test_the_distribution_beats_the_mean_on_a_real_sampler() -> None:
    """DGL-style blocks drawn from a power-law graph (gpucast.workloads.graph): hop 1's edges
    within the Monte Carlo's error of the exact expectation, and at every hop the distribution
    closer to the mean drawn than the mean-degree path."""
    pytest.importorskip("torch")
    from gpucast.workloads.graph import csc, sample_blocks

    rng = np.random.default_rng(0)
    n, m = 5000, 40_000
    weight = np.arange(1, n + 1, dtype=float) ** -0.8
    src, dst = rng.choice(n, m, p=weight / weight.sum()), rng.choice(n, m, p=weight / weight.sum())
    keep = src != dst
    src, dst = np.concatenate([src[keep], dst[keep]]), np.concatenate([dst[keep], src[keep]])
    indptr, indices = csc(src, dst, n)
    fanouts, batch, runs = (10, 5), 128, 60
    nodes, edges = [], []
    for _ in range(runs):
        seeds = rng.choice(n, batch, replace=False)
        _, blocks = sample_blocks(seeds, indptr, indices, fanouts, rng)
        nodes.append([batch] + [b.n_src for b in blocks[::-1]])
        edges.append([len(b.src) for b in blocks[::-1]])
    drawn_nodes, drawn_edges = np.array(nodes, dtype=float), np.array(edges, dtype=float)
    dist = gnn_degrees.from_sequences(
        np.bincount(dst, minlength=n), np.bincount(src, minlength=n), name="t"
    )
    hops, per_hop = gnn_degrees.sampled_hops(dist, batch, fanouts)
    _within(per_hop[:1], drawn_edges[:, :1])
    mean_degree = len(src) / n
    flat = gnn.sampled_nodes(n, batch, [min(f, mean_degree) for f in fanouts])
    err = np.abs(np.array(hops) - drawn_nodes.mean(axis=0))[1:]
    assert (err < np.abs(np.array(flat) - drawn_nodes.mean(axis=0))[1:]).all()


def test_homogeneous_hops_are_pinned() -> None:
    """The homogeneous figures as first published (before relations were generalised): a power
    law and a graph with in != out per node."""
    d = gnn_degrees.powerlaw(2.2, nodes=100_000, edges=2_000_000)
    hops, edges = gnn_degrees.sampled_hops(d, 512, (10, 5))
    assert hops == pytest.approx([512.0, 3202.4349333509645, 11685.743410513425], rel=1e-12)
    assert edges == pytest.approx([3669.8301305812556, 15791.552226155836], rel=1e-12)
    s = gnn_degrees.from_sequences(
        [1, 2, 3, 50, 0, 7, 9, 4], [4, 4, 3, 10, 20, 9, 12, 14], name="t"
    )
    hops, edges = gnn_degrees.sampled_hops(s, 3, (2, 3, 1))
    assert hops == pytest.approx(
        [3.0, 5.230663852759283, 6.9597384731527265, 7.289715766410996], rel=1e-12
    )
    assert edges == pytest.approx([4.875, 11.55565855329309, 5.9638761316088384], rel=1e-12)


def test_a_regular_graph_gives_the_mean_degree_path() -> None:
    """Every node at degree 20: the distribution and the mean-degree path agree."""
    dist = gnn_degrees.histogram([20], [100_000], name="regular")
    hops, edges = gnn_degrees.sampled_hops(dist, 1024, (15, 10))
    flat = gnn.sampled_nodes(100_000, 1024, [15, 10])
    assert hops == pytest.approx(flat, rel=0.01)
    assert edges == pytest.approx([flat[0] * 15, flat[1] * 10], rel=0.01)


def test_a_skewed_graph_changes_the_predicted_step() -> None:
    spec = gnn.GnnSpec(
        model="sage", feature_dim=100, hidden=256, classes=47, fanouts=(15, 10), batch=1024
    )
    flat = gnn.sampled_cost(spec, nodes=1_000_000, edges=20_000_000)
    skewed = gnn.sampled_cost(
        spec, nodes=1_000_000, edges=20_000_000,
        degrees=gnn_degrees.powerlaw(2.1, nodes=1_000_000, edges=20_000_000),
    )  # fmt: skip
    assert skewed.edges < 0.8 * flat.edges
    assert skewed.nodes_per_hop[-1] < 0.5 * flat.nodes_per_hop[-1]
    hw = {"tflops": 100.0, "memory_gbps": 1000.0, "host_link_gbps": 25.0}
    assert skewed.step_time_s(**hw) < 0.7 * flat.step_time_s(**hw)


# -- grouping and the random halo ------------------------------------------------------------
def test_sequences_group_into_classes() -> None:
    d = gnn_degrees.from_sequences([1, 2, 1, 0], [2, 0, 2, 0], name="t")
    assert d.count.tolist() == [1, 2, 1] and d.in_degree.tolist() == [0, 1, 2]
    assert d.out_degree.tolist() == [0, 2, 0] and d.edges == 4 and d.nodes == 4
    with pytest.raises(InvalidSpecError, match="same edges"):
        gnn_degrees.from_sequences([1, 2], [1, 1], name="t")


def test_random_halo_over_a_histogram() -> None:
    deg = _skewed(5000)
    dist = gnn_degrees.from_sequences(deg, deg, name="t")
    per_node = gnn.expected_random_halo(deg, 8)
    assert gnn.expected_random_halo(dist.out_degree, 8, counts=dist.count) == pytest.approx(
        per_node, rel=1e-12
    )
    edges = int(deg.sum())
    flat = gnn_partition.random_part_loads(nodes=5000, edges=edges, parts=8, gpus_per_node=4)
    skewed = gnn_partition.random_part_loads(
        nodes=5000, edges=edges, parts=8, gpus_per_node=4, degrees=dist
    )
    assert skewed[0].halo_in == pytest.approx(per_node / 8, rel=1e-12)
    assert skewed[0].halo_in < flat[0].halo_in  # concave in the degree


def test_bad_distributions() -> None:
    with pytest.raises(InvalidSpecError):
        gnn_degrees.histogram([1, -2], [3, 4], name="t")
    with pytest.raises(InvalidSpecError):
        gnn_degrees.histogram([1, 2], [3], name="t")
    with pytest.raises(InvalidSpecError, match="batch"):
        gnn_degrees.sampled_hops(gnn_degrees.histogram([1], [3], name="t"), 0, (2,))


# -- relations (R-GAT) -----------------------------------------------------------------------
def _hetero_process(
    rels: list[tuple[int, int, np.ndarray, np.ndarray]], counts: list[int], batch: int,
    fanouts: tuple[int, ...], runs: int, seed: int,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The process sampled_relations takes expectations of: every reached node of a relation's
    destination type draws ``min(in, f)`` times along it, each draw landing on source node
    ``v`` with probability ``out_v / E_r``; seeds of type 0."""
    rng = np.random.default_rng(seed)
    nodes, edges = [], []
    for _ in range(runs):
        reached = [np.zeros(n, dtype=bool) for n in counts]
        reached[0][rng.choice(counts[0], batch, replace=False)] = True
        hop_nodes, hop_edges = [[batch, 0]], []
        for f in fanouts:
            ks = [int(np.minimum(i[reached[d]], f).sum()) for _, d, i, _ in rels]
            for (s, _, _, o), k in zip(rels, ks, strict=True):
                reached[s][rng.choice(counts[s], k, p=o / o.sum())] = True
            hop_nodes.append([int(r.sum()) for r in reached])
            hop_edges.append(ks)
        nodes.append(hop_nodes)
        edges.append(hop_edges)
    return np.array(nodes, dtype=float), np.array(edges, dtype=float)


def test_relations_match_a_monte_carlo_of_the_process() -> None:
    """Two types, a joint relation within one (in = out per node), a skewed relation across
    and its reverse on the same nodes: every type and relation within the Monte Carlo error;
    modelling the reverse's sides as independent misses its edges (the coupling matters)."""
    papers, authors = _skewed(1500, seed=5), _skewed(1000, seed=6)
    written = np.random.default_rng(7).multinomial(int(authors.sum()), np.full(1500, 1 / 1500))
    rels = [(0, 0, papers, papers), (1, 0, written, authors), (0, 1, authors, written)]
    cites = gnn_degrees.from_sequences(papers, papers, name="cites")
    into = gnn_degrees.from_sequences(written, written, name="in")
    out_of = gnn_degrees.from_sequences(authors, authors, name="out")
    laws = [
        gnn_degrees.RelationDegrees(src=0, dst=0, into=cites, out_of=cites),
        gnn_degrees.RelationDegrees(src=1, dst=0, into=into, out_of=out_of),
        gnn_degrees.RelationDegrees(src=0, dst=1, into=out_of, out_of=into),
    ]
    fanouts = (4, 3, 2)
    nodes, edges = gnn_degrees.sampled_relations([1500, 1000], laws, [40, 0], fanouts)
    drawn_nodes, drawn_edges = _hetero_process(rels, [1500, 1000], 40, fanouts, runs=300, seed=8)
    for t in range(2):
        _within(list(nodes[1:, t]), drawn_nodes[:, 1:, t])
    for r in range(3):
        _within(list(edges[:, r]), drawn_edges[:, :, r])
    apart = [laws[0], laws[1], gnn_degrees.RelationDegrees(
        src=0, dst=1, into=gnn_degrees.from_sequences(authors, authors, name="copy"),
        out_of=into,
    )]  # fmt: skip
    _, loose = gnn_degrees.sampled_relations([1500, 1000], apart, [40, 0], fanouts)
    se = drawn_edges[:, 1, 2].std(ddof=1) / math.sqrt(300)
    assert abs(loose[1, 2] - drawn_edges[:, 1, 2].mean()) > Z * se


def test_one_relation_is_the_homogeneous_case() -> None:
    d = gnn_degrees.powerlaw(2.4, nodes=50_000, edges=600_000)
    one = gnn_degrees.RelationDegrees(src=0, dst=0, into=d, out_of=d)
    nodes, edges = gnn_degrees.sampled_relations([50_000], [one], [256], (10, 5))
    hops, per_hop = gnn_degrees.sampled_hops(d, 256, (10, 5))
    assert nodes[:, 0].tolist() == pytest.approx(hops, rel=1e-12)
    assert edges[:, 0].tolist() == pytest.approx(per_hop, rel=1e-12)


def test_relation_degrees_defaults_and_bad_laws() -> None:
    within = gnn_degrees.relation_degrees(
        src=0, dst=0, nodes_src=1000, nodes_dst=1000, edges=8000, in_alpha=2.3
    )
    assert within.joint and within.into.mean_degree == pytest.approx(8.0)
    across = gnn_degrees.relation_degrees(
        src=1, dst=0, nodes_src=4000, nodes_dst=1000, edges=8000, in_alpha=2.3
    )
    assert not across.joint and across.out_of.out_degree.tolist() == [2.0]  # uniform
    assert across.out_of.nodes == 4000
    with pytest.raises(InvalidSpecError, match="out_degree: powerlaw:ALPHA starts at degree 1"):
        gnn_degrees.relation_degrees(
            src=1, dst=0, nodes_src=40_000, nodes_dst=1000, edges=8000, out_alpha=2.5
        )
    with pytest.raises(InvalidSpecError, match="same edges"):
        gnn_degrees.RelationDegrees(
            src=1, dst=0, into=gnn_degrees.histogram([2], [10], name="a"),
            out_of=gnn_degrees.histogram([3], [10], name="b"),
        )  # fmt: skip
