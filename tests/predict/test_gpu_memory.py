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
