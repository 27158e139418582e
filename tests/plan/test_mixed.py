"""Mixed-GPU clusters: proportional batches, mixed throughput, and plans that include them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from plan_factories import context, request

from gpucast.domain.plan import TrainPlan
from gpucast.plan.hetero import (
    col_argmax,
    equivalent_think_time_s,
    mva_at,
    proportional_batches,
)
from gpucast.plan.space import DDP, PS, PS_SYNC
from gpucast.plan.train import plan_training, search
from gpucast.predict import comm

coef = st.floats(1e-4, 0.05)


@settings(max_examples=300, deadline=None)
@given(
    a=st.tuples(coef, coef),
    c=st.tuples(st.floats(1e-5, 5e-3), st.floats(1e-5, 5e-3)),
    counts=st.tuples(st.integers(1, 16), st.integers(1, 16)),
    per_worker=st.integers(1, 512),
)
def test_proportional_batches_sum_balance_and_order(
    a: tuple[float, float],
    c: tuple[float, float],
    counts: tuple[int, int],
    per_worker: int,
) -> None:
    fixed = np.array([a])
    per = np.array([c])
    n = np.array([counts])
    g = np.array([per_worker * sum(counts)])
    base, extra = proportional_batches(fixed, per, n, g)
    assert (base >= 1).all() and (extra >= 0).all() and (extra < n).all()
    # total = global batch, exactly
    assert int((n * base + extra).sum()) == int(g[0])
    # the faster worker (no slower at any batch) never gets the smaller batch
    if a[0] <= a[1] and c[0] <= c[1]:
        assert base[0, 0] >= base[0, 1]
    if a[1] <= a[0] and c[1] <= c[0]:
        assert base[0, 1] >= base[0, 0]
    # no worker idles beyond rounding: every worker's compute is within one sample of the
    # balanced step, unless a part was held at its minimum of one sample
    times = fixed + per * base
    top = fixed + per * (base + (extra > 0))
    if (base > 1).all():
        assert top.max() - times.min() <= 2 * per.max() + 1e-12
    # never worse than splitting evenly (beyond one sample)
    even = g[0] // sum(counts)
    even_step = (fixed + per * (even + 1)).max()
    assert top.max() <= even_step + per.max() + 1e-12


def test_proportional_batches_vectorised_rows() -> None:
    fixed = np.array([[0.01, 0.01], [0.0, 0.0], [0.2, 0.001]])
    per = np.array([[0.001, 0.003], [0.001, 0.001], [0.001, 0.001]])
    n = np.array([[4, 4], [3, 5], [2, 2]])
    g = np.array([1000, 17, 40])
    base, extra = proportional_batches(fixed, per, n, g)
    assert ((n * base + extra).sum(axis=1) == g).all()
    assert base[0, 0] == pytest.approx(3 * base[0, 1], rel=0.05)  # 3x faster per sample
    assert base[2, 0] == 1  # a huge fixed cost: the part keeps one sample per worker
    np.testing.assert_array_equal(col_argmax(np.array([[1, 3, 3], [5, 0, 1]])), [1, 0])


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(0.01, 2.0), min_size=2, max_size=2),
    st.tuples(st.integers(1, 8), st.integers(1, 8)),
    st.floats(1e-4, 0.5),
)
def test_equivalent_think_time_matches_comm(
    think: list[float], counts: tuple[int, int], demand: float
) -> None:
    per_worker = np.repeat(np.array(think), counts)
    expected = comm.equivalent_think_time_s(per_worker, demand)
    got = equivalent_think_time_s(np.array([think]), np.array([counts]), np.array([demand]))
    assert got[0] == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_mva_at_matches_comm() -> None:
    think = np.array([0.1, 0.3, 0.05])
    busy = np.array([0.02, 0.01, 0.04])
    other = np.array([0.0, 0.005, 0.01])
    shards = np.array([1.0, 2.0, 3.0])
    workers = np.array([3, 7, 1])
    x, _ = comm.mva_async_throughput(think, busy, other, shards, workers)
    np.testing.assert_allclose(mva_at(think, busy, other, shards, workers), x, rtol=1e-12)


def _mixed_search(**changes: object):  # type: ignore[no-untyped-def]
    req = request(allow_mixed=True, deadline_s=None, **changes)
    return search(req, context())


def test_mixed_rows_are_bounded_pairs_in_one_region() -> None:
    res = _mixed_search()
    space = res.space
    m = np.flatnonzero(space.mixed)
    assert m.size > 0
    off = space.offers
    for i in m[:: max(1, m.size // 200)]:
        a, b = int(space.offer[i]), int(space.part2[i])
        assert off.provider[a] == off.provider[b] and off.region[a] == off.region[b]
        assert off.gpu_name[a] != off.gpu_name[b]
        assert res.evaluation.workers[i] <= 16
    assert set(np.unique(space.strategy[m])) == {DDP, PS, PS_SYNC}
    no_ps = _mixed_search(strategies=("ddp", "fsdp")).space
    assert set(np.unique(no_ps.strategy[no_ps.mixed])) == {DDP}


def test_mixed_sync_step_is_the_slowest_worker_plus_exposed_comm() -> None:
    res = _mixed_search()
    ev, space = res.evaluation, res.space
    rows = np.flatnonzero(space.mixed & (space.strategy == DDP) & ev.fits & ev.valid_batch)
    assert rows.size
    for i in rows[:50]:
        assert ev.compute_s[i] == pytest.approx(ev.part_compute_s[i].max(), rel=1e-12)
        assert ev.step_s[i] == pytest.approx(ev.compute_s[i] + ev.exposed_s[i], rel=1e-12)
        n = ev.workers[i]
        counts = [
            int(space.nodes[i] * space.offers.gpus_per_node[space.offer[i]]),
            int(space.count2[i] * space.offers.gpus_per_node[space.part2[i]]),
        ]
        assert sum(counts) == n
        samples = sum(counts[k] * ev.part_batch[i, k] + ev.part_extra[i, k] for k in range(2))
        assert samples == ev.global_batch[i] == n * space.batch[i]


def test_mixed_async_rates_add_up_below_the_ps_limit() -> None:
    # a tiny model: the PS is nearly idle, so the cluster's update rate is the sum of the
    # workers' own rates; a huge one: the busiest shard bounds it
    tiny = context(gradient_bytes=1e3, n_tensors=1, max_tensor_bytes=1e3)
    small = search(request(allow_mixed=True, deadline_s=None), tiny)
    ev, space = small.evaluation, small.space
    rows = np.flatnonzero(space.mixed & (space.strategy == PS) & ev.fits & ev.has_cpu)
    assert rows.size
    for i in rows[:30]:
        counts = [
            int(space.nodes[i] * space.offers.gpus_per_node[space.offer[i]]),
            int(space.count2[i] * space.offers.gpus_per_node[space.part2[i]]),
        ]
        own = sum(k / t for k, t in zip(counts, ev.part_compute_s[i], strict=True))
        rate = ev.samples_per_s[i] / ev.batch[i]
        assert rate <= own * (1 + 1e-9)
        assert rate == pytest.approx(own, rel=0.05)
    big = search(request(allow_mixed=True, deadline_s=None), context(gradient_bytes=2e9))
    ev = big.evaluation
    rows = np.flatnonzero(big.space.mixed & (big.space.strategy == PS) & ev.has_cpu & ev.fits)
    for i in rows[:30]:
        assert ev.ps_utilization[i] <= 1.0 + 1e-9


def test_plan_with_mixed_clusters_reports_workers() -> None:
    plan = plan_training(
        request(allow_mixed=True, gpus=("FAST", "SLOW"), providers=("gcp",), allow_spot=False),
        context(),
    )
    mixed = [c for c in plan.candidates if c.mixed]
    assert mixed
    for c in mixed:
        assert c.gpu == "+".join(p.gpu for p in c.parts) and "+" in c.gpu
        assert c.gpus == sum(p.gpus for p in c.parts)
        if c.strategy != "ps":
            assert sum(p.samples_per_step for p in c.parts) == c.global_batch
            # whichever part finishes first waits (QA 39 Y: "the fastest worker idles")
            assert any("the worker done first waits" in n for n in c.notes), c.notes
    data = json.loads(json.dumps(plan.to_dict()))
    mixed_json = [c for c in data["candidates"] if "+" in c["gpu"]]
    assert mixed_json and all(len(c["workers"]) == 2 for c in mixed_json)
    assert {"gpu", "gpus", "per_worker_batch", "samples_per_step"} <= set(
        mixed_json[0]["workers"][0]
    )
    assert TrainPlan.from_dict(data).to_dict() == plan.to_dict()


def test_mixed_spot_plans_are_simulated() -> None:
    plan = plan_training(
        request(
            allow_mixed=True,
            gpus=("FAST", "SLOW"),
            providers=("aws",),
            min_p_meet=0.0,
            max_simulated=40,
        ),
        context(hazard_per_hour=0.5),
    )
    spot_mixed = [c for c in plan.candidates if c.mixed and c.market == "spot"]
    assert spot_mixed
    for c in spot_mixed:
        assert c.mc_runs >= 1000 and c.time_p90_s is not None and c.p_meet_deadline is not None
        assert c.time_s >= c.breakdown_s["train_s"]


def _v100_k80_search(**fact_changes: object):  # type: ignore[no-untyped-def]
    """4 x V100 + 4 x K80 (one GPU per node, AWS, the catalog's specs), batch 64 per worker."""
    from dataclasses import replace

    from plan_factories import offer

    from gpucast.catalog import Catalog, load_catalog

    real = load_catalog()
    cat = Catalog(
        gpus=(real.gpu("V100"), real.gpu("K80")),
        offers=(
            offer("aws", "r1", "p3.2xlarge", real.gpu("V100").name, 1, 3.06, 0.92),
            offer("aws", "r1", "p2.xlarge", real.gpu("K80").name, 1, 0.90, 0.27),
        ),
    )
    ctx = replace(context(**fact_changes), catalog=cat)
    req = request(
        allow_mixed=True, deadline_s=None, max_gpus=8, batch_size=64, strategies=("ddp",),
        allow_spot=False,
    )  # fmt: skip
    return search(req, ctx)


def _mixed_row(res) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """The 4 x V100 + 4 x K80 DDP row and the index of its V100 part."""
    space = res.space
    for i in np.flatnonzero(space.mixed & (space.strategy == DDP)):
        if int(space.nodes[i]) == 4 and int(space.count2[i]) == 4:
            return int(i), int(space.offers.gpu_name[space.offer[i]] != "V100-16GB")
    raise AssertionError("no 4 + 4 row")


def _single_row(res, gpu: str) -> int:  # type: ignore[no-untyped-def]
    space = res.space
    one = (~space.mixed) & (space.nodes == 1) & (space.strategy == DDP)
    return int(next(i for i in np.flatnonzero(one) if space.offers.gpu_name[space.offer[i]] == gpu))


def test_v100_k80_proportional_batches_beat_equal_ones() -> None:
    from gpucast.plan.hetero import SPLIT_PROPORTIONAL

    res = _v100_k80_search()
    ev = res.evaluation
    i, fast = _mixed_row(res)
    one_v100, one_k80 = _single_row(res, "V100-16GB"), _single_row(res, "K80")
    assert ev.global_batch[i] == 512 and ev.batch_split[i] == SPLIT_PROPORTIONAL
    # equal batches of 64: every step waits for the K80s (their own compute at batch 64)
    assert ev.equal_compute_s[i] > 2.0 * ev.compute_s[i]
    k80_at_64 = ev.compute_s[one_k80]
    assert ev.equal_compute_s[i] == pytest.approx(k80_at_64, rel=0.05)
    # proportional: the V100s take more; the cluster's compute throughput is about the sum of
    # the eight GPUs' own throughputs at batch 64
    assert ev.part_batch[i, fast] > 2 * ev.part_batch[i, 1 - fast]
    alone = 4 * 64 / ev.compute_s[one_v100] + 4 * 64 / ev.compute_s[one_k80]
    together = ev.global_batch[i] / ev.compute_s[i]
    assert together == pytest.approx(alone, rel=0.10)
    equal = ev.global_batch[i] / ev.equal_compute_s[i]
    assert equal < 0.5 * alone


def test_v100_k80_split_capped_by_memory() -> None:
    from gpucast.plan.hetero import SPLIT_CAPPED

    # activations that let a V100 hold ~103 samples: the proportional split would give it 108;
    # capped, it keeps what fits and the K80s take the rest (with much larger activations,
    # recomputing them on the proportional split costs less than moving samples to the K80s)
    per_sample = 1.45e8
    res = _v100_k80_search(activation_bytes_per_sample=per_sample)
    ev, space = res.evaluation, res.space
    i, fast = _mixed_row(res)
    g = space.offers.gpu[space.offer[i] if fast == 0 else space.part2[i]]
    cap = (res.gpus.usable_bytes[g] - 3e8) // per_sample
    assert ev.batch_split[i] == SPLIT_CAPPED, ev.part_batch[i]
    assert ev.part_batch[i, fast] == cap and ev.part_extra[i, fast] == 0
    assert 4 * ev.part_batch[i].sum() + ev.part_extra[i].sum() == 512
    assert not ev.checkpointing[i] and ev.fits[i]
    assert ev.compute_s[i] < ev.equal_compute_s[i]


def test_equal_and_capped_batches_sum_to_the_global_batch() -> None:
    from gpucast.plan.hetero import capped_batches, equal_batches

    n = np.array([[4, 4], [3, 5], [2, 7]])
    g = np.array([515, 17, 40])
    base, extra = equal_batches(np.array([[1.0, 3.0], [2.0, 1.0], [1.0, 1.0]]), n, g)
    assert ((n * base + extra).sum(axis=1) == g).all() and (extra <= n).all()
    assert extra[0, 0] == 3 and extra[0, 1] == 0  # the cheaper sample's part first
    b, e, changed = capped_batches(
        np.array([[100, 28]]), np.array([[0, 0]]), np.array([[4, 4]]), np.array([512]),
        np.array([[90, 500]]),
    )  # fmt: skip
    assert changed[0] and b[0, 0] == 90 and (4 * b[0] + e[0]).sum() == 512


def test_v100_k80_proportional_split_counts_the_recomputation_it_needs() -> None:
    from gpucast.plan.hetero import SPLIT_PROPORTIONAL

    # activations that let a V100 hold ~59 samples plainly (a K80 ~43): the proportional
    # split's V100 share needs recomputation, 1.33x slower; split by the speeds before it, the
    # K80s idled a quarter of the step (QA 39 Y #11). Split by the speeds with it, both parts
    # take about as long.
    res = _v100_k80_search(activation_bytes_per_sample=2.5e8)
    ev = res.evaluation
    i, fast = _mixed_row(res)
    assert ev.batch_split[i] == SPLIT_PROPORTIONAL and ev.checkpointing[i] and ev.fits[i]
    assert 4 * ev.part_batch[i].sum() + ev.part_extra[i].sum() == 512
    assert ev.part_batch[i, fast] > 3 * ev.part_batch[i, 1 - fast]  # the V100s still take most
    compute = ev.part_compute_s[i]
    assert 1.0 - compute.min() / compute.max() < 0.05, (ev.part_batch[i], compute)
    assert ev.compute_s[i] < ev.equal_compute_s[i]
