"""Readers of spot-preemption data: instance-lifetime CSVs, SkyPilot node-count traces, hazard
specs (gpucast.store.datasets.preemption) and the trace arithmetic they share (domain)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.preemption import HazardSpec, is_revocation, node_count_trace
from gpucast.predict.bursty import fit_lifetimes
from gpucast.store.datasets.preemption import (
    parse_hazard_spec,
    parse_instance_lifetimes,
    parse_spot_trace,
    read_hazard_spec,
    read_instance_lifetimes,
    read_spot_trace,
    spot_trace_frame,
)

H = 3600.0

LIFETIMES = "\r\n".join(
    [
        "start,end,reason,zone,gpu,provider",
        "2023-04-22T10:00:00Z,2023-04-22T12:30:00Z,preempted,us-east-1a,V100,AWS",
        "2023-04-22T10:00:00,2023-04-23T10:00:00,completed,us-east-1a,V100,aws",  # naive: UTC
        "2023-04-22T13:00:00+02:00,2023-04-22T13:30:00+02:00,Spot Interruption,us-east-1b,,aws",
        "1682164800,1682168400,stopped,,A100,gcp",  # Unix seconds (2023-04-22T12:00Z)
        "",
    ]
)


def _write(tmp_path: Path, name: str, data: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8", newline="")
    return path


# ----------------------------------------------------------------------- instance lifetimes
def test_lifetimes_parse_iso_unix_reasons_bom_and_crlf(tmp_path: Path) -> None:
    path = _write(tmp_path, "life.csv", "\ufeff" + LIFETIMES)
    parsed = read_instance_lifetimes(path)
    assert parsed.has_reason and len(parsed.records) == 4
    first, second, third, fourth = parsed.records
    assert first.duration_s == 2.5 * H and first.observed and first.reason == "preempted"
    assert second.duration_s == 24 * H and not second.observed  # completed: censored
    assert second.start_s == first.start_s  # naive ISO is UTC
    assert third.start_s == first.start_s + H  # 13:00+02:00 is 11:00Z
    assert third.duration_s == 0.5 * H
    assert third.observed and third.reason == "spot-interruption"
    assert fourth.start_s == 1682164800 and not fourth.observed and fourth.provider == "gcp"
    assert first.market_region == "us-east-1" and first.provider == "aws"
    assert fourth.market_region == "unknown"
    frame = parsed.frame()
    assert list(frame.columns[:3]) == ["gpu", "region", "zone"]
    assert frame["gpu"].tolist() == ["V100", "V100", "unknown", "A100"]
    assert frame["observed"].tolist() == [True, False, True, False]
    assert parsed.events == 2


def test_lifetimes_in_any_order_come_back_sorted_by_start() -> None:
    text = (
        "start,end\n"
        "2023-01-01T10:00:00Z,2023-01-01T11:00:00Z\n"
        "2023-01-01T09:00:00Z,2023-01-01T09:30:00Z\n"
        "2023-01-01T09:00:00Z,2023-01-01T09:10:00Z\n"
    )
    parsed = parse_instance_lifetimes(text, "x.csv")
    assert [r.line for r in parsed.records] == [3, 4, 2]  # stable: equal starts keep file order
    assert [r.observed for r in parsed.records] == [True, True, True]  # no reason: revoked
    assert not parsed.has_reason and parsed.out_of_order == 1
    assert "x.csv: 1 row(s) start before the row above" in (parsed.order_note() or "")
    in_order = parse_instance_lifetimes("start,end\n1,2\n1,3\n5,9\n", "y.csv")
    assert in_order.out_of_order == 0 and in_order.order_note() is None


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("", r"x\.csv: is empty"),
        ("   \r\n", r"x\.csv: is empty"),
        ("start,stop\n1,2\n", r"line 1, column 'end': missing column.*start,end"),
        ("end\n1\n", r"column 'start': missing column"),
        ("start,end\n", r"has a header but no rows"),
        ("start,end\n10,5\n", r"line 2, column 'end': end is 5 s before start.*swap"),
        # QA session 36 #28: an end in year 9999 fitted a 142-day median spot lifetime
        (
            "start,end\n2023-04-22T10:00:00Z,2023-04-22T12:00:00Z\n"
            "2023-04-22T10:00:00Z,9999-04-22T12:00:00Z\n",
            r"line 3, column 'end': the instance lived 7,.* years, longer than any spot market"
            r".*at most 10 years.*; check the end's year",
        ),
        ("start,end\nyesterday,5\n", r"line 2, column 'start': not an ISO 8601.*2023-04-22"),
        ("start,end\n1,nan\n", r"column 'end': not an ISO 8601"),
        ("start,end\n1,2,3\n", r"line 2: expected 2 cells"),
        ("start,end,reason\n1,2,\n", r"line 2, column 'reason': empty reason.*revoked"),
    ],
)
def test_lifetime_errors_name_file_line_column_and_fix(text: str, pattern: str) -> None:
    with pytest.raises(DataFormatError, match=pattern):
        parse_instance_lifetimes(text, "x.csv")


def test_lifetimes_file_errors(tmp_path: Path) -> None:
    bad = _write(tmp_path, "latin1.csv", "start,end\n1,2\n3,4 \xe9\n".encode("latin-1"))
    with pytest.raises(DataFormatError, match=r"latin1\.csv, line 3: is not UTF-8.*UTF-8"):
        read_instance_lifetimes(bad)
    with pytest.raises(DataFormatError, match="is empty"):
        read_instance_lifetimes(_write(tmp_path, "empty.csv", b""))
    with pytest.raises(DataFormatError, match="cannot read"):
        read_instance_lifetimes(tmp_path / "missing.csv")


def test_revocation_reasons() -> None:
    assert is_revocation("Preempted") and is_revocation("spot_interruption")
    assert is_revocation(" EVICTED ") and not is_revocation("completed")
    assert not is_revocation("terminated") and not is_revocation("")


def test_lifetime_records_fit_the_revocation_model() -> None:
    rows = ["start,end,reason,region,gpu"]
    rng = np.random.default_rng(0)
    t = 1_700_000_000.0
    for i, d in enumerate(rng.weibull(0.8, 40) * 6 * H):
        reason = "completed" if i % 5 == 0 else "revoked"
        rows.append(f"{t + i * 60:.0f},{t + i * 60 + d:.0f},{reason},us-east1,T4")
    parsed = parse_instance_lifetimes("\n".join(rows), "fleet.csv")
    model = fit_lifetimes(parsed.records)
    dist = model.distribution("T4", "us-east1")
    assert dist.source.startswith("fitted: T4 us-east1 (n=40, 32 revocations")
    assert 0 < float(dist.survival(6 * H)) < 1


# ------------------------------------------------------------------------- spot traces
def test_availability_trace_revocations_exposure_lifetimes_and_gaps() -> None:
    doc = json.dumps({"metadata": {"gap_seconds": 600}, "data": [1, 1, 0, 0, 1, 1, 1, 0, 1, 0]})
    trace = parse_spot_trace(doc, "us-west-2a_v100_1.json")
    g = 600.0
    assert trace.counts.tolist() == [1, 1, 0, 0, 1, 1, 1, 0, 1, 0]
    assert trace.revocations.tolist() == [0, 0, 1, 0, 0, 0, 0, 1, 0, 1]
    assert trace.exposure_node_s.tolist() == [0, g, g, 0, 0, g, g, g, 0, g]
    assert trace.tick_s[-1] == 9 * g and trace.duration_s == 9 * g
    # FIFO lifetimes: [0, 2) left-truncated, [4, 7), [8, 9)
    assert trace.lifetime_start_s.tolist() == [0, 4 * g, 8 * g]
    assert trace.lifetimes_s.tolist() == [2 * g, 3 * g, 1 * g]
    assert trace.lifetime_observed.tolist() == [True, True, True]
    assert trace.lifetime_left_truncated.tolist() == [True, False, False]
    # gaps: 2 -> 4 (2 ticks), 7 -> 8 (1 tick), 9 -> end (open, 0 ticks so far)
    assert trace.capacity_gap_start_s.tolist() == [2 * g, 7 * g, 9 * g]
    assert trace.capacity_gaps_s.tolist() == [2 * g, 1 * g, 0.0]
    assert trace.capacity_gap_observed.tolist() == [True, True, False]
    assert trace.revocations_per_node_day == pytest.approx(3 / (6 * g / 86400))
    frame = spot_trace_frame(trace)
    assert frame.shape == (10, 4) and frame["revocations"].sum() == 3


def test_multi_node_trace_fifo_and_gaps_to_the_pre_drop_level() -> None:
    # 4 nodes; drop to 1 (3 revocations), partial recovery to 3, a drop to 2, back to 4
    trace = node_count_trace([4, 4, 1, 3, 2, 4, 4], 300.0)
    g = 300.0
    assert trace.revocations.tolist() == [0, 0, 3, 0, 1, 0, 0]
    assert trace.exposure_node_s.tolist() == [0, 4 * g, 4 * g, 1 * g, 3 * g, 2 * g, 4 * g]
    # arrivals: 4 at t0, 2 at t3, 2 at t5; departures: 3 at t2, 1 at t4 (FIFO: oldest first)
    assert trace.lifetime_start_s.tolist() == [0, 0, 0, 0, 3 * g, 3 * g, 5 * g, 5 * g]
    assert trace.lifetimes_s.tolist() == [2 * g, 2 * g, 2 * g, 4 * g, 3 * g, 3 * g, g, g]
    assert trace.lifetime_observed.tolist() == [True] * 4 + [False] * 4
    assert trace.lifetime_left_truncated.sum() == 4
    # drop at t2 from 4: back at 4 at t5; drop at t4 from 3: back at >= 3 at t5
    assert trace.capacity_gaps_s.tolist() == [3 * g, 1 * g]
    assert trace.capacity_gap_observed.tolist() == [True, True]


def test_trace_gap_still_open_at_the_end_is_censored(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "t.json", json.dumps({"metadata": {"gap_seconds": 60}, "data": [2, 2, 1, 1, 1]})
    )
    trace = read_spot_trace(path)
    assert trace.capacity_gaps_s.tolist() == [120.0]
    assert trace.capacity_gap_observed.tolist() == [False]
    assert trace.lifetimes_s.tolist() == [120.0, 240.0]  # one revoked, one censored at the end
    assert trace.lifetime_observed.tolist() == [True, False]


def test_preempted_values_are_read_the_other_way_round() -> None:
    doc = json.dumps({"metadata": {"gap_seconds": 600}, "data": [0, 0, 1, 1, 0]})
    trace = parse_spot_trace(doc, "t.json", values="preempted")
    assert trace.counts.tolist() == [1, 1, 0, 0, 1]
    trace4 = parse_spot_trace(doc, "t.json", values="preempted", nodes=4)
    assert trace4.counts.tolist() == [4, 4, 3, 3, 4]
    with pytest.raises(InvalidSpecError, match="nodes"):
        parse_spot_trace(
            json.dumps({"metadata": {"gap_seconds": 1}, "data": [3]}), values="preempted", nodes=2
        )
    with pytest.raises(InvalidSpecError, match="values"):
        parse_spot_trace(doc, values="available")


@pytest.mark.parametrize(
    ("doc", "pattern"),
    [
        ('{"metadata": {"gap_seconds": 300}}', r"column 'data': missing key"),
        ('{"data": [1]}', r"column 'metadata': missing key"),
        ('{"metadata": {}, "data": [1]}', r"column 'metadata.gap_seconds': missing key"),
        ('{"metadata": {"gap_seconds": 0}, "data": [1]}', r"gap_seconds': must be .* > 0"),
        ('{"metadata": {"gap_seconds": -5}, "data": [1]}', r"> 0 \(got -5\)"),
        ('{"metadata": {"gap_seconds": "300"}, "data": [1]}', r"> 0 \(got '300'\)"),
        ('{"metadata": {"gap_seconds": 300}, "data": []}', r"column 'data': must be a non-empty"),
        ('{"metadata": {"gap_seconds": 300}, "data": [1, -1]}', r"'data\[1\]': must be >= 0"),
        ('{"metadata": {"gap_seconds": 300}, "data": [1, 1.5]}', r"'data\[1\]'.*whole.*1\.5"),
        ('{"metadata": {"gap_seconds": 300}, "data": [1, "2"]}', r"'data\[1\]'.*whole"),
        ('{"metadata": {"gap_seconds": 300}, "data": [true]}', r"'data\[0\]'.*whole"),
        ('{"metadata": {"gap_seconds": 300}, "data": [1, null]}', r"'data\[1\]'.*whole"),
        ("[1, 2]", r"is not a JSON object"),
        ('{"metadata": ', r"line 1: is not valid JSON"),
        ("", r"is empty"),
    ],
)
def test_trace_errors(doc: str, pattern: str) -> None:
    with pytest.raises(DataFormatError, match=r"^trace\.json.*" + pattern):
        parse_spot_trace(doc, "trace.json")


def test_trace_accepts_whole_floats_a_bom_and_crlf(tmp_path: Path) -> None:
    text = '\ufeff{"metadata": {"gap_seconds": 300.0},\r\n "data": [2.0, 1, 2]}\r\n'
    trace = read_spot_trace(_write(tmp_path, "t.json", text))
    assert trace.counts.tolist() == [2, 1, 2] and trace.gap_s == 300.0
    with pytest.raises(DataFormatError, match=r"line 1: is not UTF-8"):
        read_spot_trace(_write(tmp_path, "b.json", b'{"data": "\xff"}'))


def test_domain_counts_validation() -> None:
    with pytest.raises(InvalidSpecError, match=r"counts\[1\]: must be >= 0"):
        node_count_trace([1, -1], 60)
    with pytest.raises(InvalidSpecError, match=r"counts\[0\]: must be a whole number"):
        node_count_trace([0.5], 60)
    with pytest.raises(InvalidSpecError, match="gap_s"):
        node_count_trace([1], 0)
    with pytest.raises(InvalidSpecError, match="non-empty"):
        node_count_trace([], 60)


# --------------------------------------------------------------------------- hazard specs
def test_hazard_spec_constant_and_table(tmp_path: Path) -> None:
    assert read_hazard_spec(0.05) == HazardSpec.constant(0.05, source="user-given hazard 0.05/h")
    assert read_hazard_spec("0.2").hazard_per_hour == (0.2,)
    assert read_hazard_spec("0.2").is_constant
    path = _write(
        tmp_path, "h.csv", "\ufeffstart_h,hazard_per_hour\r\n0,0.3\r\n1,0.05\r\n24,0.5\r\n"
    )
    spec = read_hazard_spec(path)
    assert spec.start_h == (0.0, 1.0, 24.0) and spec.hazard_per_hour == (0.3, 0.05, 0.5)
    assert "h.csv" in spec.source and not spec.is_constant
    one_row = parse_hazard_spec("hazard_per_hour,start_h\n0.1,0\n", "one.csv")
    assert one_row.is_constant and one_row.hazard_per_hour == (0.1,)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("", r"is empty"),
        ("start,hazard\n0,1\n", r"line 1, column 'start_h': missing column"),
        ("start_h,hazard_per_hour\n", r"has a header but no rows"),
        (
            "start_h,hazard_per_hour\n1,0.1\n",
            r"line 2, column 'start_h': the first start_h must be 0",
        ),
        (
            "start_h,hazard_per_hour\n0,0.1\n2,0.2\n1,0.3\n",
            r"line 4.*must increase \(got 1 after 2\)",
        ),
        ("start_h,hazard_per_hour\n0,0.1\n0,0.2\n", r"line 3.*must increase"),
        ("start_h,hazard_per_hour\n0,-1\n", r"column 'hazard_per_hour': must be a number >= 0"),
        ("start_h,hazard_per_hour\n0,fast\n", r"must be a number >= 0 \(got 'fast'\)"),
        ("start_h,hazard_per_hour\n0\n", r"line 2: expected 2 cells"),
    ],
)
def test_hazard_table_errors(text: str, pattern: str) -> None:
    with pytest.raises(DataFormatError, match=r"^h\.csv.*" + pattern):
        parse_hazard_spec(text, "h.csv")


def test_hazard_spec_value_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match="hazard_per_hour"):
        read_hazard_spec(-0.1)
    with pytest.raises(DataFormatError, match="cannot read"):
        read_hazard_spec(tmp_path / "nope.csv")
    with pytest.raises(InvalidSpecError, match="start_h: must start at 0"):
        HazardSpec.table([1.0], [0.1])
    with pytest.raises(InvalidSpecError, match=r"hazard_per_hour\[1\]"):
        HazardSpec.table([0.0, 1.0], [0.1, float("nan")])


def test_a_hazard_number_is_finite_and_within_the_flags_bound(tmp_path: Path) -> None:
    """QA session 35: ``fit lifetimes --trace nan`` read 'nan' as a missing file, and
    ``--trace 1e12`` was stored (40,000 revocations a day) where ``--hazard-per-hour`` stops
    at 10 per node-hour."""
    for text in ("nan", "inf", "-inf"):
        with pytest.raises(InvalidSpecError, match="hazard_per_hour: must be a finite"):
            read_hazard_spec(text)
    for value in ("1e12", "10.5"):
        with pytest.raises(InvalidSpecError, match="must be at most 10 revocations per node"):
            read_hazard_spec(value)
    assert read_hazard_spec("10").hazard_per_hour == (10.0,)
    table = tmp_path / "h.csv"
    table.write_text("start_h,hazard_per_hour\n0,0.1\n5,20\n")
    with pytest.raises(InvalidSpecError, match="must be at most 10"):
        read_hazard_spec(table)
