"""Sharded and tiered embedding tables: memory per GPU, step time by phase, the planner."""

from __future__ import annotations

import pytest

from gpucast.domain.embeddings import EmbeddingTable, RecModel
from gpucast.domain.errors import InvalidSpecError
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
    assert cost.hbm_bytes_per_gpu == pytest.approx((per_gpu,) * 4)
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
    with pytest.raises(InvalidSpecError, match="more than HBM and host memory"):
        emb.plan_embeddings(model, hw)
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
    used = [i for i, b in enumerate(cost.hbm_bytes_per_gpu) if b > 1e6 * 16 + 1]
    assert len(used) == 24  # three tables x 8 shards on distinct GPUs
    big = model.tables[0]
    assert max(cost.hbm_bytes_per_gpu) == pytest.approx(
        1e6 * 16 + (big.bytes + big.rows * emb.OPTIMIZER_BYTES_PER_ROW) / 8
    )
