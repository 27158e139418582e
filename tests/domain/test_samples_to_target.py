"""samples_to_target: the MLPerf RCP checker's interpolation on tiny synthetic points."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpucast.domain.convergence import (
    ConvergencePoint,
    UnknownBenchmarkError,
    samples_to_target,
)
from gpucast.domain.errors import InvalidSpecError


def point(
    batch: int,
    values: tuple[float, ...],
    *,
    benchmark: str = "toy",
    unit: str = "epochs",
    dataset_samples: int | None = 1000,
    tokens_per_sample: int | None = None,
) -> ConvergencePoint:
    return ConvergencePoint(
        benchmark=benchmark,
        global_batch_size=batch,
        unit=unit,  # type: ignore[arg-type]
        values=values,
        dataset_samples=dataset_samples,
        tokens_per_sample=tokens_per_sample,
        rcp_folder="training_9.9.9",
        source_url="https://example.com/rcps_toy.json",
        as_of=date(2026, 12, 2),
    )


POINTS = (point(100, (10, 12, 14)), point(300, (20, 22, 24, 30)), point(200, (15, 16, 17)))


def test_at_a_reference_batch_returns_its_mean() -> None:
    r = samples_to_target(POINTS, "toy", 300)
    assert r.method == "reference" and r.lower_batch == r.upper_batch == 300
    assert r.mean_in_unit == pytest.approx(24.0) and r.epochs_mean == pytest.approx(24.0)
    assert r.samples_mean == pytest.approx(24_000)
    assert r.samples_std == pytest.approx(POINTS[1].std * 1000)
    assert r.steps_mean == pytest.approx(24_000 / 300)


def test_between_two_batches_is_the_linear_mix_of_the_nearest_two() -> None:
    r = samples_to_target(POINTS, "toy", 250)  # halfway between 200 and 300, ignoring 100
    assert r.method == "interpolated" and (r.lower_batch, r.upper_batch) == (200, 300)
    lo, hi = POINTS[2], POINTS[1]
    assert r.samples_mean == pytest.approx(1000 * (lo.mean + hi.mean) / 2)
    assert r.samples_std == pytest.approx(1000 * (lo.std + hi.std) / 2)
    assert r.samples_rcp_mean == pytest.approx(1000 * (lo.rcp_mean + hi.rcp_mean) / 2)
    quarter = samples_to_target(POINTS, "toy", 125)
    assert quarter.mean_in_unit == pytest.approx(12 + 0.25 * (16 - 12))
    assert "between 100 and 200" in quarter.source


def test_below_the_smallest_batch_keeps_the_smallest_point() -> None:
    r = samples_to_target(POINTS, "toy", 8)
    assert r.method == "smallest_reference" and r.lower_batch == r.upper_batch == 100
    assert r.samples_mean == pytest.approx(12_000)
    assert r.global_batch_size == 8 and r.steps_mean == pytest.approx(12_000 / 8)


def test_above_the_largest_batch_is_refused_with_a_fix() -> None:
    with pytest.raises(InvalidSpecError) as info:
        samples_to_target(POINTS, "toy", 301)
    err = info.value
    assert err.field == "global_batch" and err.exit_code == 2
    assert "largest MLPerf reference batch of toy (300" in str(err)
    assert err.fix is not None and "<= 300" in err.fix


def test_unknown_benchmark_lists_the_known_ones() -> None:
    pool = (*POINTS, point(64, (1, 2, 3), benchmark="resnet"))
    for name in ("tyo", "bogus"):
        with pytest.raises(UnknownBenchmarkError) as info:
            samples_to_target(pool, name, 100)
        assert "resnet" in str(info.value) and "toy" in str(info.value)
        assert info.value.exit_code == 2


def test_later_round_names_and_tokens() -> None:
    retina = (point(256, (4, 4, 5), benchmark="ssd"),)
    assert samples_to_target(retina, "RetinaNet", 256).benchmark == "ssd"
    gpt = (
        point(
            1536,
            (2048.0 * 1536 * 368,) * 3,
            benchmark="gpt3",
            unit="tokens",
            dataset_samples=None,
            tokens_per_sample=2048,
        ),
    )
    r = samples_to_target(gpt, "gpt3", 1536)
    assert r.samples_mean == pytest.approx(1536 * 368) and r.epochs_mean is None


def test_olympic_mean_drops_fastest_and_slowest() -> None:
    p = point(8, (1, 10, 10, 10, 100))
    assert p.rcp_mean == 10 and p.mean == pytest.approx(131 / 5)
    assert p.n_runs == 5 and (p.min, p.max) == (1, 100)
    unet = point(8, (1, 2, 3, 4, 50, 96, 97, 98, 99), benchmark="unet3d", unit="samples",
                 dataset_samples=None)  # fmt: skip
    assert unet.rcp_mean == 50  # unet3d: four of each dropped


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"dataset_samples": None}, "dataset_samples"),  # epochs need the epoch size
        ({"unit": "samples"}, "dataset_samples"),  # ... and only epochs have one
        ({"values": (1.0, 0.0, 2.0)}, "values"),
        ({"values": (1.0, 2.0)}, "values"),  # too few for the olympic mean
        ({"unit": "hours"}, "unit"),
        ({"batch": 0}, "global_batch_size"),
    ],
)
def test_invalid_points(kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"batch": 8, "values": (1.0, 2.0, 3.0)}
    args.update(kwargs)
    batch, values = args.pop("batch"), args.pop("values")
    with pytest.raises(InvalidSpecError) as info:
        point(batch, values, **args)  # type: ignore[arg-type]
    assert field in info.value.field


def test_two_points_at_one_batch_are_rejected() -> None:
    with pytest.raises(InvalidSpecError):
        samples_to_target((*POINTS, point(200, (1, 2, 3))), "toy", 150)


@given(st.integers(min_value=1, max_value=300))
def test_interpolated_mean_stays_between_its_neighbours(batch: int) -> None:
    r = samples_to_target(POINTS, "toy", batch)
    by_batch = {p.global_batch_size: p.mean * 1000 for p in POINTS}
    lo, hi = by_batch[r.lower_batch], by_batch[r.upper_batch]
    assert min(lo, hi) - 1e-6 <= r.samples_mean <= max(lo, hi) + 1e-6
    assert r.lower_batch <= max(batch, 100) and r.upper_batch >= batch
