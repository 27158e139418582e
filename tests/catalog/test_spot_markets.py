"""Spot-market facts: provider semantics and the documented scenarios, each row sourced."""

from __future__ import annotations

import pytest

from gpucast.catalog.spot import spot_market, spot_markets, spot_scenarios
from gpucast.domain.errors import UnknownProviderError


def test_every_provider_has_a_current_kind_with_a_source() -> None:
    for provider in ("aws", "gcp", "azure"):
        market = spot_market(provider)
        assert market.current and market.source_url.startswith("https://")
        assert market.as_of and market.notice_s > 0
    assert sum(m.current for m in spot_markets()) == 3


def test_semantics_differ_by_provider_and_kind() -> None:
    assert spot_market("aws").notice_s == 120
    assert spot_market("gcp").max_lifetime_s is None  # Spot VMs: no 24 h stop
    assert spot_market("gcp", "preemptible").max_lifetime_s == 24 * 3600
    assert spot_market("azure").max_lifetime_s is None


def test_unknown_provider_names_the_known_ones() -> None:
    with pytest.raises(UnknownProviderError, match="aws"):
        spot_market("oracle")


def test_scenarios_are_documented() -> None:
    scenarios = spot_scenarios()
    assert set(scenarios) == {"optimistic", "pessimistic"}
    pessimistic = scenarios["pessimistic"]
    assert pessimistic.hazard_per_node_hour is not None and pessimistic.hazard_per_node_hour > 0.1
    assert pessimistic.capacity_gap_s > 0 and "spot-traces" in pessimistic.source_url
    assert scenarios["optimistic"].hazard_per_node_hour is None  # the Spot Advisor band
