"""Importers of ../shared/data/transient: lifetime.csv sections, prices, training runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.predict.revocation import RevocationModel
from gpucast.store.datasets.transient import (
    STUDY_2018,
    STUDY_2019,
    lifetimes_frame,
    parse_lifetime_csv,
    parse_price_table,
    read_chief_rejoining,
    read_lifetimes,
    read_price_table,
    read_startup_times,
    read_training_experiments,
)

SYNTHETIC = "\r\n".join(
    [
        "K80,,",
        "VM name,Start,Terminate",
        "a-us-east1-c-0,2/18/19 23:39,2/19/19 23:44",  # 24 h 5 min: censored
        "a-us-east1-c-1less,2/18/19 23:39,2/19/19 01:39",  # 2 h revocation, no load
        "a-us-east1-c-2,2/18/19 23:39,not a time",  # malformed
        "a-us-east1-c-3,2/19/19 10:00,2/19/19 09:00",  # ends before it starts
        "a-p100-us-east1-c-4,2/18/19 23:39,2/19/19 01:39",  # P100 in the K80 section
        "P100,,",
        "VM name,Start,Terminate",
        "a-p100-europe-west1-b-0,2/19/19 22:53,2/20/19 09:50",
        "garbage row",
        "Previous experiments,,",
        "8-May,created,terminated",
        "test0,09:49:51,10:28:22",
        "test0night,21:37:18,09:12:26",  # next day
        "test4less,1046389:24:27,1046391:54:31",  # elapsed-hour stamps
        "test5,10:00:00,1046391:54:31",  # mixed formats
        "gpu0,10:46:09,11:10:49",  # GPU VM without a zone header
        "7-Jun,,",
        "us-central1-a,,",
        "gpu1,10:46:20,10:49:46",
        "",
    ]
)


def test_synthetic_lifetimes_parse_valid_rows_and_report_the_rest() -> None:
    parsed = parse_lifetime_csv(SYNTHETIC, "synthetic.csv")
    names = [r.vm_name for r in parsed.records]
    assert names == [
        "a-us-east1-c-0",
        "a-us-east1-c-1less",
        "a-p100-europe-west1-b-0",
        "test0",
        "test0night",
        "test4less",
        "gpu1",
    ]
    by_name = {r.vm_name: r for r in parsed.records}
    assert by_name["a-us-east1-c-1less"].duration_s == 2 * 3600
    assert not by_name["a-us-east1-c-1less"].loaded
    assert by_name["a-us-east1-c-0"].region == "us-east1"
    assert by_name["a-p100-europe-west1-b-0"].gpu == "P100"
    assert by_name["test0night"].duration_s == pytest.approx(11 * 3600 + 35 * 60 + 8)
    assert by_name["test4less"].duration_s == pytest.approx(2 * 3600 + 30 * 60 + 4)
    assert by_name["gpu1"].gpu == "K80" and by_name["gpu1"].zone == "us-central1-a"
    assert by_name["test0"].gpu == "cpu" and by_name["test0"].study == STUDY_2018
    reasons = {s.line: s.reason for s in parsed.skipped}
    assert len(parsed.skipped) == 6
    assert "M/D/YY" in reasons[5]
    assert "before it starts" in reasons[6]
    assert "P100 VM inside the K80 section" in reasons[7]
    assert "expected 3 cells" in reasons[11]
    assert "mixes" in reasons[17]
    assert "zone sub-header" in reasons[18]
    assert "line 5" in parsed.report()
    frame = lifetimes_frame(parsed.records)
    assert set(frame["study"]) == {STUDY_2019}
    observed = frame.set_index("vm_name")["observed"]
    assert not bool(observed["a-us-east1-c-0"])  # the 24 h cap: censored
    assert bool(observed["a-us-east1-c-1less"])


def test_garbage_never_crashes() -> None:
    parsed = parse_lifetime_csv('x,"unterminated\n,,,\n\x00,1,2\nK80,,\na,b\n', "bad.csv")
    assert parsed.records == ()
    assert len(parsed.skipped) >= 2


def test_price_table_parsing_and_missing_rows(tmp_path: Path) -> None:
    table = parse_price_table(
        "server,market,usd_per_hour\nK80,spot,0.25\ncpu-ps,on-demand,0.1\n", "p.csv"
    )
    assert table.price("K80", spot=True) == 0.25
    with pytest.raises(InvalidSpecError, match="no on-demand price for K80"):
        table.price("K80", spot=False)
    with pytest.raises(DataFormatError, match="market"):
        parse_price_table("server,market,usd_per_hour\nK80,reserved,1\n", "p.csv")
    with pytest.raises(DataFormatError, match="usd_per_hour"):
        parse_price_table("server,market,usd_per_hour\nK80,spot,-1\n", "p.csv")
    with pytest.raises(DataFormatError, match="missing column"):
        parse_price_table("gpu,price\nK80,1\n", "p.csv")
    with pytest.raises(InvalidSpecError, match="price-table: file not found"):
        read_price_table(tmp_path / "nope.csv")


@pytest.mark.shared_data
def test_shared_lifetimes(shared_data: Path) -> None:
    parsed = read_lifetimes(shared_data / "transient" / "lifetime" / "lifetime.csv")
    assert len(parsed.records) > 500
    frame = lifetimes_frame(parsed.records)
    k80 = frame[frame["gpu"] == "K80"]
    assert len(k80) == 64 and set(k80["region"]) == {
        "us-east1",
        "us-central1",
        "us-west1",
        "europe-west1",
    }
    assert 0 < int(k80["observed"].sum()) < 64  # some revoked, most reached the 24 h cap
    model = RevocationModel().fit(frame)
    assert model.source("K80", "us-central1").startswith("fitted: K80 us-central1")


@pytest.mark.shared_data
def test_shared_training_prices_and_overheads(shared_data: Path) -> None:
    exps = {
        (e.workers, e.spot): e
        for e in read_training_experiments(shared_data / "transient" / "training")
    }
    assert {(2, True), (4, True), (8, True), (1, False), (8, False)} <= set(exps)
    four = exps[(4, True)].runs
    assert len(four) == 32 and int(four["revoked"].sum()) == 12
    assert not exps[(2, True)].runs["in_agg"].all()  # the failed run 1 is not in agg_data
    prices = read_price_table(shared_data / "transient" / "prices_2019_gcp.csv")
    assert prices.price("K80", spot=True) == pytest.approx(0.2556)
    rejoin = read_chief_rejoining(shared_data / "cmdare" / "chief_rejoining")
    assert {r.chief_left_at_step for r in rejoin} >= {None, 6000, 7500}
    startup = read_startup_times(shared_data / "cmdare" / "startup_time")
    assert set(startup["market"]) == {"spot", "on-demand"}
    assert (startup["total_s"] > 0).all()
