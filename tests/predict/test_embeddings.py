"""Sharded and tiered embedding tables: memory per GPU, step time by phase, the planner."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gpucast.domain.embeddings import EmbeddingTable, RecModel, SsdSpec
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.serving import LatencyCurve
from gpucast.predict import embeddings as emb

GIB = 2**30


def _model(big_rows: int = 50_000_000) -> RecModel:
    return RecModel(
        name="toy",
        tables=(
            EmbeddingTable(name="big", rows=big_rows, dim=128, pooling=10.0),
            EmbeddingTable(name="mid", rows=2_000_000, dim=128, pooling=3.0),
            EmbeddingTable(name="tiny", rows=100, dim=128, pooling=1.0),
        ),
        dense_params=1e6,
        dense_train_flops_per_sample=6e6,
        global_batch=8192,
        source_url="test",
    )


def _hw(gpus: int = 4, hbm_gib: float = 80.0, host_gib: float = 1024.0) -> emb.ShardingHardware:
    return emb.ShardingHardware(
        gpus=gpus, gpus_per_node=8, hbm_bytes=hbm_gib * GIB, hbm_gbps=2000.0, link_gbps=300.0,
        network_gbps=400.0, host_bytes_per_node=host_gib * GIB, host_link_gbps=32.0,
        dense_tflops=100.0,
    )  # fmt: skip


def test_row_wise_memory_and_gather_by_hand() -> None:
    model, hw = _model(), _hw()
    plan = [emb.Placement(table=t.name, sharding="row_wise") for t in model.tables]
    cost = emb.evaluate_plan("row-wise", model, plan, hw)
    state = sum(t.rows for t in model.tables) * emb.OPTIMIZER_BYTES_PER_ROW
    per_gpu = (model.embedding_bytes + state) / 4 + 1e6 * emb.DENSE_BYTES_PER_PARAM
    # the batch's buffers: each GPU's partial pooled rows of the whole batch and the indices
    # it sends, and the pooled rows of its own 2,048 samples it receives
    rows = sum(t.row_bytes for t in model.tables)
    sent = 8192 * rows + 2048 * sum(t.pooling for t in model.tables) * emb.INDEX_BYTES
    batch = sent + 2048 * rows
    assert cost.batch_bytes_per_gpu == pytest.approx((batch,) * 4)
    assert cost.hbm_bytes_per_gpu == pytest.approx((per_gpu + batch,) * 4)
    gathered = sum(8192 * t.pooling * t.row_bytes for t in model.tables) / 4
    expect = emb.TRAIN_TRAFFIC_FACTOR * gathered / (2000e9 * emb.GATHER_EFFICIENCY)
    assert cost.gather_s == pytest.approx(expect)
    assert cost.dense_s == pytest.approx(8192 / 4 * 6e6 / 100e12)
    assert cost.alltoall_s > 0 and cost.allreduce_s > 0 and cost.uvm_s == 0
    assert cost.feasible


def test_table_wise_puts_each_table_whole_on_one_gpu() -> None:
    model, hw = _model(), _hw()
    plans = dict(emb.candidate_plans(model, hw))
    tw = plans["table-wise"]
    assert {p.sharding for p in tw} == {"table_wise"}
    cost = emb.evaluate_plan("table-wise", model, tw, hw)
    big = next(p for p in tw if p.table == "big")
    assert big.gpu is not None
    assert cost.hbm_bytes_per_gpu[big.gpu] >= model.tables[0].bytes
    assert len({p.gpu for p in tw}) == 3  # three tables spread over three GPUs


def test_planner_picks_the_fastest_feasible_plan() -> None:
    model, hw = _model(), _hw()
    best, costs = emb.plan_embeddings(model, hw)
    assert best.feasible
    assert best.step_time_s == min(c.step_time_s for c in costs if c.feasible)
    dp = next(c for c in costs if c.name == "data-parallel")
    # the whole model on every GPU: 24 GiB of the big table alone is fine on 80 GiB, but its
    # gradient all-reduce makes data-parallel far slower than the sharded plans
    assert dp.step_time_s > 10 * best.step_time_s
    assert emb.dense_priced_step_s(model, hw) > 10 * best.step_time_s


def test_a_plan_that_violates_memory_is_one_clear_error() -> None:
    model, hw = _model(big_rows=150_000_000), _hw(gpus=2, hbm_gib=40.0)
    with pytest.raises(InvalidSpecError, match="no 'table-wise' of toy fits on 2 GPUs: GPU"):
        emb.plan_embeddings(model, hw, sharding="table-wise")
    with pytest.raises(InvalidSpecError, match="sharding: must be one of"):
        emb.plan_embeddings(model, hw, sharding="diagonal")


def test_a_plan_not_offered_here_says_why_and_what_offers_it() -> None:
    """QA 37: --sharding tiered / grid / hierarchical-ps on 8 GPUs whose tables fit read
    "must be one of data-parallel, ..., mixed here": no reason, no fix."""
    model, hw = _model(big_rows=150_000_000), _hw(gpus=4)  # "big" too large to place whole
    cases = {
        "hierarchical-ps": ("these 4 GPUs are one node of 8", "use more --gpus than a node"),
        "grid": ("on 4 GPUs no table has room to", "--sharding column-wise"),
        "tiered": ("every table fits in HBM here", "give --cache-fraction"),
    }
    for sharding, (why, fix) in cases.items():
        with pytest.raises(InvalidSpecError, match=f"sharding: .*{why}.*; .*{fix}"):
            emb.plan_embeddings(model, hw, sharding=sharding)
    with pytest.raises(InvalidSpecError, match=r"this model has none.*; use one of"):
        emb.plan_embeddings(_model(), hw, sharding="tiered", cache_fraction=0.5)
    # with --cache-fraction the tiered plan is offered; each named fix gets its plan
    assert emb.plan_embeddings(model, hw, sharding="tiered", cache_fraction=0.5)[0].name == (
        "tiered"
    )
    assert emb.plan_embeddings(model, _hw(gpus=32), sharding="grid")[0].name == "grid"
    assert emb.plan_embeddings(model, _hw(gpus=16), sharding="hierarchical-ps")[0].name == (
        "hierarchical-ps"
    )


def test_the_batch_buffers_grow_with_the_batch_until_no_plan_fits() -> None:
    """--batch 1e12 was priced at the HBM of the reference batch (QA 35 R #11)."""
    small, large = (
        emb.plan_embeddings(replace(_model(), global_batch=b), _hw())[0] for b in (8192, 2**20)
    )
    assert max(large.hbm_bytes_per_gpu) > max(small.hbm_bytes_per_gpu) + 0.5 * GIB
    assert max(large.batch_bytes_per_gpu) == pytest.approx(
        max(small.batch_bytes_per_gpu) * 2**20 / 8192, rel=0.01
    )
    with pytest.raises(InvalidSpecError, match=r"of it the batch's buffers.*use a smaller --bat"):
        emb.plan_embeddings(replace(_model(), global_batch=10**12), _hw())


def test_tiered_plan_uses_the_hit_rate_for_host_traffic() -> None:
    model, hw = _model(big_rows=400_000_000), _hw(gpus=2, hbm_gib=80.0)
    best, _ = emb.plan_embeddings(model, hw, hit_rate=lambda c: 0.9)
    assert best.name == "tiered"
    uvm = [p for p in best.placements if p.sharding == "row_wise_uvm"]
    assert uvm and all(0 < (p.cache_fraction or 0) < 1 for p in uvm)
    assert best.host_bytes_per_node > 0 and best.hit_rate == pytest.approx(0.9)
    worse, _ = emb.plan_embeddings(model, hw, hit_rate=lambda c: 0.5)
    assert worse.uvm_s == pytest.approx(best.uvm_s * 5)  # misses 0.5 vs 0.1
    fixed, _ = emb.plan_embeddings(model, hw, hit_rate=lambda c: c, cache_fraction=0.01)
    assert fixed.hit_rate == pytest.approx(0.01)


def test_tables_larger_than_every_tier() -> None:
    model, hw = _model(big_rows=400_000_000), _hw(gpus=1, hbm_gib=16.0, host_gib=64.0)
    with pytest.raises(InvalidSpecError, match="more than HBM and host memory of 1 GPU hold"):
        emb.plan_embeddings(model, hw)  # was "of 1 GPUs" (QA 35 R #20)
    with pytest.raises(InvalidSpecError, match="cache-fraction"):
        emb.plan_embeddings(_model(), _hw(), cache_fraction=1.5)


def test_bad_specs() -> None:
    with pytest.raises(InvalidSpecError, match="pooling"):
        EmbeddingTable(name="t", rows=10, dim=4, pooling=0.0)
    with pytest.raises(InvalidSpecError, match="rows"):
        EmbeddingTable(name="t", rows=0, dim=4, pooling=1.0)
    with pytest.raises(InvalidSpecError, match="hbm_gbps"):
        emb.ShardingHardware(
            gpus=1, gpus_per_node=1, hbm_bytes=1.0, hbm_gbps=float("nan"), link_gbps=1.0,
            network_gbps=1.0, host_bytes_per_node=0.0, host_link_gbps=1.0, dense_tflops=1.0,
        )  # fmt: skip


def test_column_shards_are_at_least_16_wide_and_spread() -> None:
    model, hw = _model(), _hw(gpus=64)
    cw = dict(emb.candidate_plans(model, hw))["column-wise"]
    assert {p.shards for p in cw} == {8}  # dim 128 / 16
    cost = emb.evaluate_plan("column-wise", model, cw, hw)
    held = np.subtract(cost.hbm_bytes_per_gpu, cost.batch_bytes_per_gpu)  # without buffers
    used = [i for i, b in enumerate(held) if b > 1e6 * 16 + 1]
    assert len(used) == 24  # three tables x 8 shards on distinct GPUs
    big = model.tables[0]
    assert max(held) == pytest.approx(
        1e6 * 16 + (big.bytes + big.rows * emb.OPTIMIZER_BYTES_PER_ROW) / 8
    )


def _hot_model(batch: int = 131_072) -> RecModel:
    """One table with a pooling factor of 100 (as MLPerf DLRM-DCNv2's) among light ones."""
    light = tuple(
        EmbeddingTable(name=f"t{i}", rows=1_000_000, dim=128, pooling=1.0) for i in range(6)
    )
    return replace(
        _model(),
        tables=(EmbeddingTable(name="hot", rows=40_000_000, dim=128, pooling=100.0), *light),
        global_batch=batch,
    )


def test_grid_spreads_a_hot_table_past_its_column_shards() -> None:
    model, hw = _hot_model(), _hw(gpus=64)
    plans = dict(emb.candidate_plans(model, hw))
    hot = next(p for p in plans["grid"] if p.table == "hot")
    assert hot.sharding == "grid" and hot.shards == 8 and hot.row_shards > 1
    grid = emb.evaluate_plan("grid", model, plans["grid"], hw)
    cw = emb.evaluate_plan("column-wise", model, plans["column-wise"], hw)
    assert grid.gather_s < cw.gather_s / 2  # the pooling-100 table's gathers over more GPUs
    best, _ = emb.plan_embeddings(model, hw)
    assert best.name == "grid" and best.step_time_s < cw.step_time_s
    assert best.counts.get("grid", 0) >= 1


def test_grid_memory_and_traffic_by_hand() -> None:
    model = replace(_hot_model(), tables=(_hot_model().tables[0],))
    hw = _hw(gpus=32)
    hot = model.tables[0]
    plan = [emb.Placement(table="hot", sharding="grid", gpu=0, shards=8, row_shards=2)]
    cost = emb.evaluate_plan("grid", model, plan, hw)
    full = hot.bytes + hot.rows * emb.OPTIMIZER_BYTES_PER_ROW
    dense = 1e6 * emb.DENSE_BYTES_PER_PARAM
    held = np.subtract(cost.hbm_bytes_per_gpu, cost.batch_bytes_per_gpu)  # without buffers
    assert held[:16] == pytest.approx((dense + full / 16,) * 16)
    assert held[16:] == pytest.approx((dense,) * 16)
    gathered = model.global_batch * hot.pooling * hot.row_bytes / 16
    expect = emb.TRAIN_TRAFFIC_FACTOR * gathered / (2000e9 * emb.GATHER_EFFICIENCY)
    assert cost.gather_s == pytest.approx(expect)
    # each GPU of the span sends partial sums of its 16 columns for the whole batch
    cw = emb.evaluate_plan(
        "cw", model, [replace(plan[0], sharding="column_wise", row_shards=1)], hw
    )
    assert cost.alltoall_s == pytest.approx(cw.alltoall_s)


def test_no_grid_where_column_shards_already_cover_every_gpu() -> None:
    assert "grid" not in dict(emb.candidate_plans(_hot_model(), _hw(gpus=8)))
    with pytest.raises(InvalidSpecError, match="sharding"):
        emb.plan_embeddings(_hot_model(), _hw(gpus=8), sharding="grid")


def test_grid_plans_for_the_most_gpus_a_plan_takes() -> None:
    hw = replace(_hw(gpus=65_536), gpus_per_node=8)
    plans = dict(emb.candidate_plans(_hot_model(batch=1 << 22), hw))
    hot = next(p for p in plans["grid"] if p.table == "hot")
    assert hot.shards * hot.row_shards <= 65_536


_SSD = SsdSpec(
    name="test-nvme", read_gbps=7.0, random_read_iops=1e6, read_latency_s=45e-6, capacity_bytes=2e12
)


def _ssd_hw(gpus: int = 1, host_gib: float = 64.0, drives: int = 1) -> emb.ShardingHardware:
    return replace(
        _hw(gpus=gpus, hbm_gib=16.0, host_gib=host_gib), ssd=_SSD, ssd_drives_per_node=drives
    )


def test_tier_shares_are_inclusive_and_sum_to_one() -> None:
    def h(f: float) -> float:
        return 0.9 * f**0.3

    shares = emb.tier_shares(h, 0.05, 0.4)
    assert shares == pytest.approx((h(0.05), h(0.4) - h(0.05), 1 - h(0.4)))
    assert sum(shares) == pytest.approx(1.0)
    assert emb.tier_shares(h, 0.05, 1.0)[2] == 0.0  # DRAM holds every row: no SSD reads
    assert emb.tier_shares(None, 0.2, 0.5) == (1.0, 0.0, 0.0)
    assert emb.tier_shares(h, 0.5, 0.2) == pytest.approx((h(0.5), 0.0, 1 - h(0.5)))
    with pytest.raises(InvalidSpecError, match="dram fractions"):
        emb.tier_shares(h, 0.5, 1.2)


def test_ssd_time_is_the_slower_of_bandwidth_and_iops() -> None:
    # 512-byte rows: 1 page each, IOPS-bound (1e6 rows / 1e6 IOPS = 1 s vs 0.07 s of bandwidth)
    assert emb.ssd_read_s(1e6, 512, _SSD) == pytest.approx(1.0)
    # 64 KiB rows: 16 pages each but bandwidth-bound (65.5 GB / 7 GB/s = 9.4 s vs 16 s of IOPS)
    assert emb.ssd_read_s(1e6, 65536, _SSD) == pytest.approx(16.0)
    assert emb.ssd_read_s(1e5, 8192, _SSD) == pytest.approx(max(8192e5 / 7e9, 2e5 / 1e6))
    assert emb.ssd_read_s(1e6, 512, _SSD, drives=4) == pytest.approx(0.25)


def test_tables_beyond_hbm_and_dram_spill_to_ssd_instead_of_failing() -> None:
    model = _model(big_rows=400_000_000)  # 191 GiB of fp32 rows + state
    with pytest.raises(InvalidSpecError, match="more than HBM and host memory"):
        emb.plan_embeddings(model, _hw(gpus=1, hbm_gib=16.0, host_gib=64.0))
    best, _ = emb.plan_embeddings(model, _ssd_hw(), hit_rate=lambda c: min(1.0, 0.5 + c))
    assert best.name == "tiered" and best.feasible
    uvm = [p for p in best.placements if p.sharding == "row_wise_uvm"]
    d = uvm[0].dram_fraction
    assert d is not None and uvm[0].cache_fraction is not None
    assert 0 < d < 1
    assert best.host_bytes_per_node == pytest.approx(64 * GIB)  # DRAM filled first
    assert best.ssd_bytes_per_node > 100 * GIB
    hbm, dram, ssd = best.tier_shares or (0, 0, 0)
    assert ssd == pytest.approx(1 - min(1.0, 0.5 + d)) and ssd > 0
    assert hbm + dram + ssd == pytest.approx(1.0)
    # SSD reads by hand: the big table's SSD share of its lookups, read and written back
    big = model.tables[0]
    rows = ssd * 8192 * big.pooling
    assert best.ssd_s == pytest.approx(2 * emb.ssd_read_s(rows, big.row_bytes, _SSD))
    assert best.uvm_s > 0
    four, _ = emb.plan_embeddings(model, _ssd_hw(drives=4), hit_rate=lambda c: min(1.0, 0.5 + c))
    assert four.ssd_s == pytest.approx(best.ssd_s / 4)


def test_tables_larger_than_hbm_dram_and_ssd_together() -> None:
    small_ssd = replace(_SSD, capacity_bytes=50 * GIB)
    hw = replace(_ssd_hw(), ssd=small_ssd)
    with pytest.raises(
        InvalidSpecError, match=r"more than HBM, host memory and SSDs.*--ssd-drives"
    ):
        emb.plan_embeddings(_model(big_rows=400_000_000), hw)
    with pytest.raises(InvalidSpecError, match="ssd-drives"):
        replace(_ssd_hw(), ssd_drives_per_node=0)


def test_lookup_time_per_tier() -> None:
    kw = {"hbm_gbps": 2000.0, "host_link_gbps": 32.0}
    t = emb.lookup_time_s(1e6, 512, (0.8, 0.15, 0.05), ssd=_SSD, **kw)
    assert t.hbm_s == pytest.approx(0.8e6 * 512 / (2000e9 * emb.GATHER_EFFICIENCY))
    assert t.dram_s == pytest.approx(0.2e6 * 512 / 32e9)
    assert t.ssd_s == pytest.approx(45e-6 + 0.05e6 / 1e6)
    assert t.time_s == pytest.approx(t.hbm_s + t.dram_s + t.ssd_s)
    assert emb.lookup_time_s(1e6, 512, (1.0, 0.0, 0.0), **kw).ssd_s == 0.0
    with pytest.raises(InvalidSpecError, match="ssd"):
        emb.lookup_time_s(1e6, 512, (0.8, 0.1, 0.1), **kw)


def test_cached_lookup_curve_adds_the_misses_per_batch() -> None:
    curve = LatencyCurve(batch_sizes=(1, 8, 64), latency_s=(1e-3, 2e-3, 8e-3), host_s=2e-4)
    kw = {"hbm_gbps": 2000.0, "host_link_gbps": 32.0, "lookups_per_sample": 26.0}
    all_hbm = emb.cached_lookup_curve(curve, row_bytes=256, shares=(1.0, 0.0, 0.0), **kw)
    assert all_hbm.latency_s == pytest.approx(curve.latency_s)
    dram = emb.cached_lookup_curve(curve, row_bytes=256, shares=(0.6, 0.4, 0.0), **kw)
    assert dram.latency_s[2] - curve.latency_s[2] == pytest.approx(0.4 * 64 * 26 * 256 / 32e9)
    assert dram.host_s == curve.host_s and "DRAM 40.0%" in dram.source
    ssd = emb.cached_lookup_curve(curve, row_bytes=256, shares=(0.6, 0.3, 0.1), ssd=_SSD, **kw)
    extra = np.array(ssd.latency_s) - np.array(dram.latency_s)
    assert extra == pytest.approx(45e-6 + 0.1 * np.array([1, 8, 64]) * 26 / 1e6)


def test_hierarchical_ps_pulls_each_distinct_row_once() -> None:
    model, hw = _model(), _hw(gpus=16)  # two nodes of 8
    u = 0.1
    ps = emb.evaluate_parameter_server(model, hw, distinct_per_lookup=u)
    working = sum(min(u * 8192 / 2 * t.pooling, t.rows) * t.row_bytes for t in model.tables)
    assert ps.ps_network_s == pytest.approx(2 * working * 0.5 / (400 / 8 * 1e9))
    assert ps.uvm_s == pytest.approx(2 * working / 8 / 32e9)
    assert ps.ssd_s == 0.0 and ps.feasible
    more = emb.evaluate_parameter_server(model, hw, distinct_per_lookup=2 * u)
    assert more.ps_network_s > 1.9 * ps.ps_network_s
    _, costs = emb.plan_embeddings(model, hw, distinct_per_lookup=u)
    assert "hierarchical-ps" in {c.name for c in costs}
    one_node = {c.name for c in emb.plan_embeddings(model, _hw(gpus=8))[1]}
    assert "hierarchical-ps" not in one_node
    with pytest.raises(InvalidSpecError, match="distinct rows per lookup"):
        emb.evaluate_parameter_server(model, hw, distinct_per_lookup=0.0)


def test_each_table_follows_its_own_hit_rate_curve() -> None:
    """Two UVM-cached tables: one hot (hit rate 0.9), one on the global curve (0.5); the
    plan's hit rate is their lookup-weighted mean and the host traffic follows each one."""
    model = replace(
        _model(big_rows=400_000_000),
        tables=(
            EmbeddingTable(name="big", rows=400_000_000, dim=128, pooling=10.0),
            EmbeddingTable(name="big2", rows=400_000_000, dim=128, pooling=30.0),
        ),
    )
    hw = _hw(gpus=2)
    plan = [emb.Placement(table=t, sharding="row_wise_uvm", cache_fraction=0.05)
            for t in ("big", "big2")]  # fmt: skip
    glob = emb.evaluate_plan("t", model, plan, hw, hit_rate=lambda c: 0.5)
    own = emb.evaluate_plan(
        "t", model, plan, hw, hit_rate=lambda c: 0.5, table_hit_rates={"big2": lambda c: 0.9}
    )
    assert glob.hit_rate == pytest.approx(0.5)
    assert own.hit_rate == pytest.approx((10 * 0.5 + 30 * 0.9) / 40)
    # misses over PCIe: big 0.5 x 10 lookups, big2 0.1 x 30 (was 0.5 x 30)
    assert own.uvm_s == pytest.approx(glob.uvm_s * (0.5 * 10 + 0.1 * 30) / (0.5 * 40))
    best, _ = emb.plan_embeddings(
        model, hw, hit_rate=lambda c: 0.5, table_hit_rates={"big": lambda c: 0.9,
                                                             "big2": lambda c: 0.9},
    )  # fmt: skip
    assert best.name == "tiered" and best.hit_rate == pytest.approx(0.9)


def test_hierarchical_ps_tier_shares_per_table() -> None:
    """Host memory for half the rows: each table's SSD share is 1 - h(d) of its own curve,
    the plan's the working-bytes-weighted mean."""
    model, hw = _model(big_rows=400_000_000), _hw(gpus=16, host_gib=50.0)
    hw = replace(hw, ssd=SsdSpec(name="nvme", read_gbps=7.0, random_read_iops=1e6,
                                 read_latency_s=50e-6, capacity_bytes=4e12))  # fmt: skip
    glob = emb.evaluate_parameter_server(model, hw, hit_rate=lambda c: 0.5)
    own = emb.evaluate_parameter_server(
        model, hw, hit_rate=lambda c: 0.5, table_hit_rates={"big": lambda c: 0.99}
    )
    assert glob.tier_shares is not None and own.tier_shares is not None
    assert glob.tier_shares[2] == pytest.approx(0.5)
    assert own.tier_shares[2] < 0.2 and own.ssd_s < glob.ssd_s
    assert sum(own.tier_shares) == pytest.approx(1.0)


def test_no_dense_part_and_no_replicated_table_reduces_nothing() -> None:
    """Without dense parameters (a tables file without the dense columns) and with no
    data-parallel table there is nothing to all-reduce: 0 s, not the hops' latency (it priced
    50 us on 2 GPUs while the warning said the all-reduce counts as 0)."""
    model = replace(_model(), dense_params=0.0, dense_train_flops_per_sample=0.0)
    hw = _hw(gpus=2)
    plan = [emb.Placement(table=t.name, sharding="row_wise") for t in model.tables]
    cost = emb.evaluate_plan("row-wise", model, plan, hw)
    assert cost.allreduce_s == 0.0
    assert cost.alltoall_s > 0  # the pooled rows still cross
    dp = [emb.Placement(table=t.name, sharding="data_parallel") for t in model.tables]
    assert emb.evaluate_plan("data-parallel", model, dp, hw).allreduce_s > 0  # the tables' grads


def test_a_tiny_step_is_paced_by_its_kernel_launches() -> None:
    # one 100k x 16 table on one GPU moved so little that the step read 0.19 us (5.3 G
    # samples/s); a training step launches at least its lookup and its backward-update
    from gpucast.predict.roofline import KERNEL_OVERHEAD_S

    tiny = RecModel(
        name="tiny",
        tables=(EmbeddingTable(name="t", rows=100_000, dim=16, pooling=1.0),),
        dense_params=0.0,
        dense_train_flops_per_sample=0.0,
        global_batch=1024,
        source_url="test",
    )
    best, _ = emb.plan_embeddings(tiny, _hw(gpus=1))
    assert best.work_s < KERNEL_OVERHEAD_S
    assert best.step_time_s == pytest.approx(emb.LOOKUP_KERNELS * KERNEL_OVERHEAD_S)
    assert best.to_dict()["launch_floor_s"] == pytest.approx(best.step_time_s)
    assert emb.dense_priced_step_s(tiny, _hw(gpus=1)) >= best.step_time_s
    # sharded over 4 GPUs: the all-to-alls and the all-reduce launch too
    row = next(c for c in emb.plan_embeddings(tiny, _hw(gpus=4))[1] if c.name == "row-wise")
    assert row.launch_s == pytest.approx((emb.LOOKUP_KERNELS + emb.DIST_KERNELS) * 10e-6)
    # a step of real work is its phases, the floor far below
    big, _ = emb.plan_embeddings(_model(), _hw())
    assert big.step_time_s == big.work_s > 5 * big.launch_s
