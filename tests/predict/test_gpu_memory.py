"""The one usable-memory rule, and every verb's fit measured against it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from llm_infer_factories import TRUE, gpu, model

from gpucast.domain.gpu_memory import (
    RESERVED_FRACTION,
    RESERVED_GIB,
    engine_room_bytes,
    engine_share_note,
    usable_bytes,
)
from gpucast.domain.parallel import ParallelAssumptions
from gpucast.domain.units import GIB
from gpucast.predict import memory
from gpucast.predict.llm_infer import predict_inference


@pytest.mark.parametrize(("memory_gib", "usable_gib"), [(80, 75.0), (40, 37.0), (24, 21.8)])
def test_usable_is_memory_less_context_and_fragmentation(
    memory_gib: float, usable_gib: float
) -> None:
    assert usable_bytes(memory_gib) / GIB == pytest.approx(usable_gib)
    assert usable_bytes(0.5) == 0.0  # never below 0


def test_the_training_verbs_share_the_rule() -> None:
    # predict/simulate/plan train (predict.memory) and llm-train (ParallelAssumptions)
    h100 = gpu("H", memory_gib=80.0)
    assert memory.usable_bytes(h100) == usable_bytes(80.0)
    assumptions = ParallelAssumptions()
    assert (assumptions.reserved_gib, assumptions.reserved_fraction) == (
        RESERVED_GIB,
        RESERVED_FRACTION,
    )


@pytest.mark.parametrize(
    ("fraction", "of_free", "reserve_gib", "room_gib"),
    [
        (0.9, False, 3.0, 0.9 * 80 - 3.0 - 20),  # vLLM: its 0.9 keeps more than the rule
        (0.9, True, 5.0, 0.9 * 60 - 5.0),  # TensorRT-LLM: 0.9 of what the weights leave
        (1.0, False, 1.0, 75.0 - 20),  # the whole GPU: capped at the usable bytes
        (1.0, True, 0.0, 75.0 - 20),
    ],
)
def test_an_engine_never_gets_more_than_the_usable_bytes(
    fraction: float, of_free: bool, reserve_gib: float, room_gib: float
) -> None:
    room = engine_room_bytes(80.0, 20 * GIB, fraction, of_free, reserve_gib * GIB)
    assert float(room) / GIB == pytest.approx(room_gib)
    assert float(room) <= usable_bytes(80.0) - 20 * GIB
    note = engine_share_note("E", 80.0, 20 * GIB, fraction, of_free, reserve_gib)
    assert "75.0 GiB usable of 80 GiB" in note
    assert ("capped at" in note) == (fraction == 1.0)


def test_engine_room_is_vectorised_and_goes_negative_when_weights_do_not_fit() -> None:
    room = engine_room_bytes(
        np.array([80.0, 40.0]), np.array([73.0, 39.0]) * GIB, 0.9, np.array([0, 1]), GIB
    )
    assert room.shape == (2,)
    assert (room < 0).all()


@pytest.mark.parametrize("fraction", [0.5, 0.9, 1.0])
@pytest.mark.parametrize("memory_gib", [24.0, 80.0, 141.0])
def test_predict_infer_capacity_within_the_rule(fraction: float, memory_gib: float) -> None:
    engine = dataclasses.replace(TRUE, memory_fraction=fraction)
    p = predict_inference(
        model("small"), gpu("G", memory_gib=memory_gib), engine,
        batch_size=4, input_len=128, output_len=64,
    )  # fmt: skip
    usable = usable_bytes(memory_gib)
    assert p.memory.capacity_bytes <= usable + 1e-6
    own = fraction * memory_gib * GIB - engine.memory_reserve_gib * GIB
    assert p.memory.capacity_bytes == pytest.approx(min(own, usable))


# -- the verbs that kept their own figure until session 33 --------------------------------------
def test_a_planners_own_share_is_capped_at_the_usable_bytes() -> None:
    from gpucast.domain.gpu_memory import share_bytes

    # TorchRec's 15% keeps more than the rule on an 80 GiB GPU: its figure is unchanged
    assert share_bytes(80.0, 0.85) == 0.85 * 80 * GIB < usable_bytes(80.0)
    # on an 8 GiB GPU it would keep less than the CUDA context and fragmentation: the rule
    assert share_bytes(8.0, 0.85) == usable_bytes(8.0) < 0.85 * 8 * GIB
    assert share_bytes(16.0, 0.9) == usable_bytes(16.0)  # 0.9: the rule binds below 20 GiB


def test_plan_embeddings_tables_get_torchrecs_share_within_the_rule() -> None:
    from gpucast.predict.embeddings import HBM_USABLE_FRACTION, ShardingHardware

    def capacity(memory_gib: float) -> float:
        hw = ShardingHardware(
            gpus=8, gpus_per_node=8, hbm_bytes=memory_gib * GIB, hbm_gbps=2000.0,
            link_gbps=450.0, network_gbps=400.0, host_bytes_per_node=1024 * GIB,
            host_link_gbps=64.0, dense_tflops=400.0,
        )  # fmt: skip
        return hw.table_capacity_bytes

    assert capacity(80.0) == HBM_USABLE_FRACTION * 80 * GIB  # as before: 68 GiB of 80
    assert capacity(8.0) == usable_bytes(8.0)  # was 6.8 GiB, more than the rule's 6.6


def test_predict_gnn_refuses_a_full_graph_between_the_usable_and_the_whole_memory() -> None:
    """23M nodes and 500M edges need 77.6 GiB: within an A100-80GB's 80 GiB (priced before
    session 33) but beyond its 75.0 usable, as every other training verb counts it."""
    import gpucast
    from gpucast.domain.errors import InvalidSpecError

    graph = {"gpu": "A100-80GB", "nodes": 23_000_000, "edges": 500_000_000, "feature_dim": 128}
    with pytest.raises(InvalidSpecError, match=r"needs 78 GiB .*75\.0 GiB usable of 80 GiB"):
        gpucast.predict_gnn(**graph)
    split = gpucast.predict_gnn(**graph, split=True)
    assert split.notes[0].startswith("does NOT fit") and "75.0 GiB usable" in split.notes[0]


def test_predict_coldstart_refuses_a_batch_between_the_usable_and_the_whole_memory() -> None:
    """resnet18 at batch 2,300 peaks at ~15 GiB: within a T4's 16 GiB (priced before session
    33), beyond its 14.2 usable."""
    import gpucast
    from gpucast.domain.errors import InvalidSpecError

    with pytest.raises(InvalidSpecError, match=r"needs 15\.\d GiB .*a T4's 14\.2 GiB usable of 16"):
        gpucast.predict_coldstart("resnet18", gpu="T4", batch_size=2300)


def test_serving_fits_a_gpu_or_mig_slice_by_its_usable_memory_and_a_cpu_by_all_of_it() -> None:
    from gpucast.domain.errors import InvalidSpecError
    from gpucast.domain.serving import BatchingPolicy, LatencyCurve, ModelDeployment, ServerSpec
    from gpucast.domain.serving_plan import ModelProfile
    from gpucast.plan.mig_serve import SliceType, slice_fit

    curve = LatencyCurve.affine(0.001, 0.0005, max_batch=8)
    # 4.0 GiB fits a 4.75 GiB slice whole, not its 3.5 usable: no batch fits it now
    prof = ModelProfile(model="m", server="s", curve=curve, memory_fixed_gib=4.0)
    fit = slice_fit(
        prof, SliceType(name="1g.5gb", memory_gib=4.75), 1.0, max_batch=8, max_utilisation=1.0
    )
    assert fit.capacity_rps == 0
    dep = ModelDeployment(
        model="m", latency=curve, batching=BatchingPolicy(max_batch_size=8), memory_gib=76.0
    )
    with pytest.raises(InvalidSpecError, match=r"76\.00 GiB .* has 75\.00 GiB usable of 80 GiB"):
        ServerSpec(name="g", kind="gpu", memory_gib=80.0, price_usd_per_hour=1.0, models=(dep,))
    host = ServerSpec(name="c", kind="cpu", memory_gib=80.0, price_usd_per_hour=1.0, models=(dep,))
    assert host.memory_gib == 80.0  # host memory: the GPU rule does not apply
