"""`gpucast.measure_infer_curve` from Python (real PyTorch on the CPU, tiny budgets)."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpucast
from gpucast.app.curves import InferCurveRequest, InferCurveResult
from gpucast.domain.errors import InvalidSpecError
from gpucast.store.db import Store

FAST = {"max_time_s": 0.3, "min_samples": 3, "target_ci": 0.5}


def test_keywords_store_and_frame(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    result = gpucast.measure_infer_curve(workload="mlp", batch_sizes="1,4", db=db, **FAST)
    assert isinstance(result, InferCurveResult)
    out = result.to_dict()
    assert out["workload"] == "mlp" and out["colocation"] is None
    (curve,) = out["curves"]
    assert [p["batch_size"] for p in curve["points"]] == [1, 4]
    assert curve["fit"] == {"fixed_s": result.curves[0].fixed_s,
                            "per_sample_s": result.curves[0].per_sample_s,
                            "warning": result.curves[0].fit_warning()}  # fmt: skip
    assert curve["latency_curve"]["batch_sizes"] == [1, 4]
    with Store(db).open(create=False) as store:
        assert store.count_runs(kind="measurement", workload="mlp") == 2
    frame = result.to_frame()
    assert list(frame["batch_size"]) == [1, 4] and (frame["median_s"] > 0).all()


def test_device_defaults_as_measure_train_and_infer() -> None:
    """One --device default across measure train / infer / infer-curve (auto, as the README's
    ``measure train --device auto`` example)."""
    from gpucast.app.measure import MeasureInferRequest, MeasureTrainRequest
    from gpucast.domain.options import fields_of

    defaults = {
        next(f.default for f in fields_of(cls) if f.name == "device")
        for cls in (InferCurveRequest, MeasureTrainRequest, MeasureInferRequest)
    }
    assert defaults == {"auto"}


def test_a_request_object_without_saving(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    request = InferCurveRequest(workload="mlp", batch_sizes=(2,), save=False, **FAST)
    result = gpucast.measure_infer_curve(request, db=db)
    assert result.curves[0].measurement.run_ids == ()
    assert not db.exists()


@pytest.mark.parametrize(
    "options, text",
    [
        ({"batch_sizes": "1,x"}, "batch-sizes: must be a whole number"),
        ({"batch_sizes": [0]}, "batch-sizes: must be integers >= 1"),
        ({"precisions": ["fp7"]}, "precision: must be one of"),
        ({"precision": "fp32,fp7"}, "precision: must be one of"),
        ({"min_samples": 1}, "min-samples: must be >= 2"),  # QA session 36: was >= 1, then
        # the stopping rule's internal `min_samples: must be >= 2` (no fix)
        ({"min_samples": 10**9}, "min-samples: must be <= 100,000"),
        ({"target_ci": 5}, "target-ci: must be in (0, 1]"),
        ({"colocate_batch": 0}, "colocate-batch: must be >= 1"),
    ],
)
def test_bad_options_raise_one_typed_error(options: dict[str, object], text: str) -> None:
    with pytest.raises(InvalidSpecError) as info:
        gpucast.measure_infer_curve(workload="mlp", save=False, **options)
    assert text in str(info.value)


def test_a_line_that_misses_the_measured_points_says_so() -> None:
    """A CPU thread pool can make batch 1 take 0.17 ms and batch 2-8 24 ms: the fitted line
    (relative least squares) then misses by ~98%; the curve says where, not just the line."""
    from types import SimpleNamespace

    from gpucast.app.curves import InferCurve

    def point(batch: int, median_s: float) -> SimpleNamespace:
        return SimpleNamespace(spec=SimpleNamespace(batch_size=batch), median_s=median_s)

    bent = SimpleNamespace(points=[point(1, 0.167e-3), point(2, 24e-3), point(8, 24e-3)])
    curve = InferCurve(measurement=bent, fixed_s=0.0, per_sample_s=0.182e-3)  # type: ignore[arg-type]
    warning = curve.fit_warning()
    assert warning is not None and "at batch 2 the median is 24 ms, the line 0.364 ms" in warning
    straight = SimpleNamespace(points=[point(1, 1.1e-3), point(4, 2.0e-3), point(8, 3.3e-3)])
    fit = InferCurve(measurement=straight, fixed_s=0.8e-3, per_sample_s=0.3e-3)  # type: ignore[arg-type]
    assert fit.fit_warning() is None


def test_one_batch_size_says_it_fixes_no_line() -> None:
    """QA session 36: `measure infer-curve mlp --batch-sizes 8` printed `fit: 0.000 ms +
    1.0966 ms x batch` with no warning: a line through one point, its fixed cost unmeasured."""
    from types import SimpleNamespace

    from gpucast.app.curves import InferCurve

    def point(batch: int, median_s: float) -> SimpleNamespace:
        return SimpleNamespace(spec=SimpleNamespace(batch_size=batch), median_s=median_s)

    one = SimpleNamespace(points=[point(8, 8.8e-3)])
    curve = InferCurve(measurement=one, fixed_s=0.0, per_sample_s=1.1e-3)  # type: ignore[arg-type]
    warning = curve.fit_warning()
    assert warning is not None and warning.startswith("one batch size (8) fixes no line")
    assert "e.g. --batch-sizes 1,16" in warning
