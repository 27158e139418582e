"""One rule for spot lifetimes: given hazard > named model > GCE data (GCP only) > scenario."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpucast.catalog import load_catalog
from gpucast.catalog.spot import spot_scenarios
from gpucast.domain.errors import InvalidSpecError
from gpucast.inputs.spot import Lifetimes
from gpucast.predict.revocation import ExponentialLifetime


@pytest.fixture(scope="module")
def catalog():  # type: ignore[no-untyped-def]
    return load_catalog()


def test_without_data_every_provider_gets_the_scenario(catalog) -> None:  # type: ignore[no-untyped-def]
    pessimistic = Lifetimes(data_dir=None, catalog=catalog)
    dist, kind = pessimistic.lookup("V100", "us-east-1", "aws")
    assert kind == "scenario" and "pessimistic scenario" in dist.source
    hazard = spot_scenarios()["pessimistic"].hazard_per_node_hour
    assert isinstance(dist, ExponentialLifetime) and dist.hazard_per_hour == hazard
    assert pessimistic.capacity_gap("V100", "us-east-1", "aws") == 2520.0
    optimistic = pessimistic.with_scenario("optimistic")
    dist, kind = optimistic.lookup("V100", "us-east-1", "aws")
    assert kind == "scenario" and "Spot Advisor" in dist.source
    assert optimistic.capacity_gap("V100", "us-east-1", "aws") == 0


@pytest.mark.shared_data
def test_gce_data_is_used_for_gcp_only(catalog, shared_data: Path) -> None:  # type: ignore[no-untyped-def]
    lifetimes = Lifetimes(data_dir=shared_data, catalog=catalog)
    gcp, kind = lifetimes.lookup("V100", "us-central1")  # provider from the region
    assert kind == "fitted" and "without the 24 h stop" in gcp.source
    assert getattr(gcp, "cap_s", "none") is None
    aws, kind = lifetimes.lookup("V100", "us-east-1", "aws")
    assert kind == "scenario" and "no lifetime data for aws" in aws.source
    legacy = Lifetimes(data_dir=shared_data, catalog=catalog, gcp_kind="preemptible")
    capped, _ = legacy.lookup("K80", "us-east1", "gcp")
    draws = capped.sample(np.random.default_rng(0), 2000)
    assert draws.max() <= 24 * 3600  # preemptible VMs are stopped after 24 h
    assert "published GCE lifetimes for" in lifetimes.source()


def test_a_given_hazard_wins(catalog) -> None:  # type: ignore[no-untyped-def]
    lifetimes = Lifetimes(data_dir=None, catalog=catalog, hazard_per_hour=0.2)
    dist, kind = lifetimes.lookup("A100", "us-east-1", "aws")
    assert kind == "given" and dist.hazard_per_hour == 0.2  # type: ignore[attr-defined]


def test_a_named_model_applies_within_its_scope(catalog) -> None:  # type: ignore[no-untyped-def]
    mine = ExponentialLifetime(hazard_per_hour=0.3, source="named model 'x'")
    lifetimes = Lifetimes(
        data_dir=None, catalog=catalog, named=(mine, {"gpu": "V100", "provider": "aws"})
    )
    assert lifetimes.lookup("V100", "us-east-1", "aws") == (mine, "named")
    assert lifetimes.lookup("A100", "us-east-1", "aws")[1] == "scenario"
    assert lifetimes.lookup("V100", "westus2", "azure")[1] == "scenario"


@pytest.mark.parametrize(
    "kw, field",
    [({"scenario": "medium"}, "spot-scenario"), ({"band": "3%"}, "interruption-band"),
     ({"method": "tarot"}, "lifetime-method"), ({"gcp_kind": "cheap"}, "spot-kind")],
)  # fmt: skip
def test_bad_choices_name_their_flag(catalog, kw: dict[str, str], field: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidSpecError, match=field):
        Lifetimes(data_dir=None, catalog=catalog, **kw)  # type: ignore[arg-type]


def test_a_preemptible_gcp_vm_stops_at_24_h_whatever_its_hazard(catalog) -> None:  # type: ignore[no-untyped-def]
    """QA session 35: ``simulate train --provider gcp --spot --hazard-per-hour 0.01
    --spot-kind preemptible`` (and the scenario without --data-dir) ran as Spot VMs: the 24 h
    stop applied only to the published GCE fit, so the flag changed nothing."""
    for kw in ({"hazard_per_hour": 0.01}, {}):
        legacy = Lifetimes(data_dir=None, catalog=catalog, gcp_kind="preemptible", **kw)
        dist, _ = legacy.lookup("K80", "us-east1", "gcp")
        assert dist.sample(np.random.default_rng(0), 4000).max() <= 24 * 3600
        assert "stopped at 24 h (--spot-kind preemptible)" in dist.source
        aws, _ = legacy.lookup("V100", "us-east-1", "aws")  # GCP only
        assert getattr(aws, "cap_s", None) is None
    spot = Lifetimes(data_dir=None, catalog=catalog, hazard_per_hour=0.01)
    dist, _ = spot.lookup("K80", "us-east1", "gcp")
    assert dist.sample(np.random.default_rng(0), 4000).max() > 24 * 3600


def test_a_named_models_source_is_said_once(catalog) -> None:  # type: ignore[no-untyped-def]
    """QA session 35: "named model: named model 't_life': ..." in simulate train's sources."""
    mine = ExponentialLifetime(hazard_per_hour=0.3, source="named model 'x': a trace")
    lifetimes = Lifetimes(data_dir=None, catalog=catalog, named=(mine, {"gpu": "V100"}))
    lifetimes.lookup("V100", "us-east-1", "aws")
    said = lifetimes.source()
    assert "named model 'x': a trace" in said and "named model: named model" not in said
