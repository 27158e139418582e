"""The topology-aware (MAPA-like) allocator against first-fit."""

from __future__ import annotations

import pytest

from gpucast.catalog.topologies import load_topologies
from gpucast.domain.errors import InvalidSpecError
from gpucast.plan.placement import choose_gpus, fragmentation, rank_placements

DGX1 = load_topologies()["dgx1-v100"]


def test_mapa_picks_an_nv2_pair_where_first_fit_takes_an_nv1_pair() -> None:
    mapa = choose_gpus(DGX1, DGX1.gpus, 2)
    first = choose_gpus(DGX1, DGX1.gpus, 2, policy="first-fit")
    assert first.gpus == ("gpu0", "gpu1") and first.bandwidth_gb_per_s == 25.0
    assert mapa.bandwidth_gb_per_s == 50.0


def test_ranking_is_best_first_and_covers_every_set() -> None:
    ranked = rank_placements(DGX1, DGX1.gpus, 3)
    assert len(ranked) == 56
    assert [p.score for p in ranked] == sorted((p.score for p in ranked), reverse=True)
    assert all(0.0 <= p.fragmentation <= 1.0 for p in ranked)


def test_fragmentation_counts_the_cut_links() -> None:
    free = DGX1.gpus
    assert fragmentation(DGX1, free, free) == 0.0
    # gpu0 has 6 of the 24 NVLinks (25 GB/s each) of a free DGX-1
    assert fragmentation(DGX1, free, ("gpu0",)) == pytest.approx(6 / 24)


def test_with_no_fragmentation_weight_the_widest_set_wins() -> None:
    best = choose_gpus(DGX1, DGX1.gpus, 4, fragmentation_weight=0.0)
    assert best.bandwidth_gb_per_s == 100.0


@pytest.mark.parametrize(
    ("free", "k", "policy", "match"),
    [
        (("gpu0", "gpu1"), 3, "mapa", "needs 1..2"),
        (("gpu0", "gpu9"), 1, "mapa", "gpu9 is not a GPU"),
        (("gpu0",), 1, "best-fit", "policy"),
    ],
)
def test_bad_requests(free: tuple[str, ...], k: int, policy: str, match: str) -> None:
    with pytest.raises(InvalidSpecError, match=match):
        choose_gpus(DGX1, free, k, policy=policy)
