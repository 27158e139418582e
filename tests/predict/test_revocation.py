"""Revocation (server lifetime) models: censoring, fallbacks, sampling, save/load, bands."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from gpucast.domain.errors import InvalidInputError, InvalidSpecError, NotFittedError
from gpucast.domain.spot import GCP_PREEMPTIBLE_CAP_S, EvalSeries, censor_observed, zone_to_region
from gpucast.predict.base import estimator_from_dict
from gpucast.predict.revocation import (
    EmpiricalLifetime,
    ExponentialLifetime,
    RevocationModel,
    WeibullLifetime,
    estimate_restart_penalty,
    few_revocations_note,
    hazard_from_interruption_band,
    monthly_fraction_to_hazard_per_hour,
)

H = 3600.0


def _frame(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for region, scale_h in (("us-central1-c", 10.0), ("europe-west1-b", 40.0)):
        d = np.minimum(rng.weibull(0.7, 60) * scale_h * H, GCP_PREEMPTIBLE_CAP_S + 300)
        rows += [("K80", region, x) for x in d]
    rows += [("K80", "us-east1-c", GCP_PREEMPTIBLE_CAP_S + 300)] * 10  # no revocation at all
    frame = pd.DataFrame(rows, columns=["gpu", "region", "duration_s"])
    frame["observed"] = censor_observed(frame["duration_s"])
    return frame


def test_zone_to_region_and_censoring() -> None:
    assert zone_to_region("us-east1-c") == "us-east1"
    assert zone_to_region("europe-west4") == "europe-west4"
    obs = censor_observed([60.0, 23.0 * H, 23.6 * H, 24.1 * H])
    assert obs.tolist() == [True, True, False, False]


def test_fit_uses_region_then_pooled_then_fallback() -> None:
    model = RevocationModel(method="weibull").fit(_frame())
    central = model.distribution("K80", "us-central1")
    assert central.source.startswith("fitted: K80 us-central1")
    east = model.distribution("K80", "us-east1")
    assert east.source.startswith("pooled: K80 all regions")
    assert "us-east1 alone has 0" in east.source
    band = hazard_from_interruption_band("5-10%")
    assert model.distribution("V100", "us-east1", fallback=band) is band
    with pytest.raises(InvalidSpecError, match="no fitted lifetimes for V100"):
        model.distribution("V100", "us-east1")
    # the censored cap is not mistaken for revocations: survival at 20 h is well above 0
    assert 0.0 < float(central.survival(20 * H)) < 1.0
    assert float(central.survival(GCP_PREEMPTIBLE_CAP_S)) == 0.0


def test_weibull_recovers_its_shape() -> None:
    rng = np.random.default_rng(3)
    d = rng.weibull(0.6, 4000) * 8 * H
    frame = pd.DataFrame({"gpu": "K80", "region": "r", "duration_s": d, "observed": True})
    stats = RevocationModel(cap_s=None).fit(frame).group_stats("K80")
    assert stats["weibull_shape"] == pytest.approx(0.6, rel=0.06)
    assert stats["weibull_scale_s"] == pytest.approx(8 * H, rel=0.1)


def test_sampling_matches_the_survival_function() -> None:
    rng = np.random.default_rng(0)
    for dist in (
        WeibullLifetime(scale_s=5 * H, shape=0.7),
        ExponentialLifetime(hazard_per_hour=0.2, cap_s=GCP_PREEMPTIBLE_CAP_S),
        EmpiricalLifetime(times_s=(600.0, 3600.0, 7200.0), survival_after=(0.9, 0.8, 0.5)),
    ):
        draws = dist.sample(rng, 40_000)
        assert np.all(draws >= 0) and np.all(draws <= GCP_PREEMPTIBLE_CAP_S)
        for t in (1800.0, 4 * H, 10 * H):
            assert np.mean(draws > t) == pytest.approx(float(dist.survival(t)), abs=0.01)


def test_km_tail_ends_at_the_cap() -> None:
    km = EmpiricalLifetime(times_s=(60.0,), survival_after=(0.75,))
    draws = km.sample(np.random.default_rng(1), 10_000)
    assert set(np.unique(draws)) == {60.0, GCP_PREEMPTIBLE_CAP_S}
    assert np.mean(draws == 60.0) == pytest.approx(0.25, abs=0.02)


def test_save_load_round_trip_gives_the_same_predictions() -> None:
    for method in ("weibull", "km"):
        model = RevocationModel(method=method).fit(_frame())
        data = json.loads(json.dumps(model.to_dict()))
        loaded = estimator_from_dict(data)
        assert isinstance(loaded, RevocationModel)
        t = np.array([600.0, 3 * H, 12 * H])
        assert np.array_equal(
            loaded.survival(t, "K80", "us-central1"), model.survival(t, "K80", "us-central1")
        )
        a = model.sample_lifetimes(np.random.default_rng(5), 100, "K80", "europe-west1")
        b = loaded.sample_lifetimes(np.random.default_rng(5), 100, "K80", "europe-west1")
        assert np.array_equal(a, b)


def test_contract_predict_before_fit_and_input_not_mutated() -> None:
    with pytest.raises(NotFittedError):
        RevocationModel().survival(1.0, "K80", "us-east1")
    frame = _frame()
    before = frame.copy()
    RevocationModel().fit(frame)
    pd.testing.assert_frame_equal(frame, before)
    with pytest.raises(InvalidInputError, match="missing column"):
        RevocationModel().fit(frame.drop(columns=["observed"]))
    with pytest.raises(InvalidSpecError, match="method"):
        RevocationModel(method="cox")


def test_interruption_bands_convert_to_hazards() -> None:
    h = monthly_fraction_to_hazard_per_hour(0.1)
    assert 1 - math.exp(-h * 730) == pytest.approx(0.1)
    mid = hazard_from_interruption_band("5-10%")
    assert mid.hazard_per_hour == pytest.approx(monthly_fraction_to_hazard_per_hour(0.075))
    assert "AWS Spot Advisor 5-10%" in mid.source
    rates = [
        hazard_from_interruption_band(b).hazard_per_hour
        for b in ("<5%", "5-10%", "10-15%", "15-20%", ">20%")
    ]
    assert rates == sorted(rates)
    with pytest.raises(InvalidSpecError, match="interruption-band"):
        hazard_from_interruption_band("30%")
    with pytest.raises(InvalidSpecError, match="hazard"):
        ExponentialLifetime(hazard_per_hour=-1.0)


def test_restart_penalty_from_synthetic_rejoin_runs() -> None:
    steps = (0.0, 4000.0, 8000.0, 12000.0, 16000.0)
    base = EvalSeries(
        name="base", steps=steps, wall_s=(0.0, 200.0, 400.0, 600.0, 800.0), chief_left_at_step=None
    )
    # the interval holding step 6000 takes 200 (normal) + 2000 * 0.05 (lost steps) + 120 s
    hit = EvalSeries(
        name="exp-6000",
        steps=steps,
        wall_s=(0.0, 200.0, 620.0, 820.0, 1020.0),
        chief_left_at_step=6000,
    )
    est = estimate_restart_penalty([base, hit])
    assert est.value == pytest.approx(120.0)
    assert est.unit == "s"
    with pytest.raises(InvalidSpecError):
        estimate_restart_penalty([base])


def test_a_model_json_without_a_kind_says_so() -> None:
    """QA session 35: ``--power-model`` of ``{"a": 1}`` read "unknown model kind None"."""
    with pytest.raises(InvalidInputError, match=r"^the model JSON has no 'kind' field"):
        estimator_from_dict({"a": 1})
    with pytest.raises(InvalidInputError, match=r"^unknown model kind 'nope'"):
        estimator_from_dict({"kind": "nope"})


@pytest.mark.parametrize("method", ["weibull", "km"])
def test_a_fit_on_few_revocations_is_said_with_its_count(method: str) -> None:
    """QA 37 FO#9: V100's lifetimes rest on 5 revocations and no line said so; a fitted
    distribution keeps its count, and fewer than 20 are named once per fitted group."""
    frame = _frame()
    few = frame[frame["region"] == "us-central1-c"].head(12).assign(gpu="V100")
    model = RevocationModel(method=method).fit(pd.concat([frame, few]))
    central = model.distribution("K80", "us-central1")
    east = model.distribution("K80", "us-east1")  # pooled: every K80 revocation
    v100 = model.distribution("V100", "us-central1")
    assert central.revocations == model.group_stats("K80", "us-central1")["events"] >= 20
    assert east.revocations == model.group_stats("K80")["events"]
    events = model.group_stats("V100")["events"]
    assert 0 < events < 20 and v100.revocations == events
    note = few_revocations_note([central, east, None, v100, v100])
    assert note == (
        f"lifetimes fitted on fewer than 20 observed revocations: fitted: V100 us-central1 "
        f"({events})"
    )
    assert few_revocations_note([central, east, hazard_from_interruption_band("5-10%")]) is None
