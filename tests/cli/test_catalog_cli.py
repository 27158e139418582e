"""`gpucast catalog ...` exit codes and JSON shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app

FIX = Path(__file__).resolve().parents[1] / "catalog" / "fixtures"
runner = CliRunner()


def test_gpus_json() -> None:
    result = runner.invoke(app, ["catalog", "gpus", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    names = {g["name"] for g in data["gpus"]}
    assert {"K80", "H100-SXM", "MI300X"} <= names
    a100 = next(g for g in data["gpus"] if g["name"] == "A100-40GB")
    assert a100["mig_profiles"][0]["compute_slices"] == 1 and a100["as_of"]


def test_gpus_json_names_its_gb_per_s_bandwidths_as_such() -> None:
    """QA 35 S #14: ``memory_bandwidth_gbps`` is GB/s where ``network_gbps`` is Gbit/s; the
    unambiguous keys sit beside the old ones (kept for saved files)."""
    data = json.loads(runner.invoke(app, ["catalog", "gpus", "--json"]).stdout)
    k80 = next(g for g in data["gpus"] if g["name"] == "K80")
    assert k80["memory_bandwidth_gb_per_s"] == k80["memory_bandwidth_gbps"] == 240.0
    assert k80["interconnect_gb_per_s"] is None
    h100 = next(g for g in data["gpus"] if g["name"] == "H100-SXM")
    assert h100["interconnect_gb_per_s"] == h100["interconnect_gbps"] == 900.0


def test_gpus_table() -> None:
    result = runner.invoke(app, ["catalog", "gpus"])
    assert result.exit_code == 0 and "H200" in result.stdout


def test_gpus_table_shows_the_power_facts_the_energy_verbs_read() -> None:
    """QA 40 E #6: the power-limit range and idle draw were only in --json."""
    table = runner.invoke(app, ["catalog", "gpus"], terminal_width=250).stdout
    rows = {
        line.split("│")[1].strip(): line.split("│") for line in table.splitlines() if "│" in line
    }
    head = next(line.split("┃") for line in table.splitlines() if "┃ GPU" in line)
    assert [c.strip() for c in head[12:14]] == ["Limit W", "Idle W"]
    assert rows["A100-40GB"][12].strip() == "100-400" and rows["P4"][12].strip() == "?-75"
    assert rows["K80"][12].strip() == rows["K80"][13].strip() == "-"  # no power facts


def test_offers_json_filters() -> None:
    result = runner.invoke(
        app, ["catalog", "offers", "--provider", "gcp", "--gpu", "k80", "--spot", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["count"] == len(data["offers"]) > 0
    assert all(o["gpu"] == "K80" and o["spot_usd_per_hour"] for o in data["offers"])
    cpu = json.loads(runner.invoke(app, ["catalog", "offers", "--cpu-only", "--json"]).stdout)
    assert cpu["count"] > 0 and all(o["gpus"] == 0 for o in cpu["offers"])


def test_unknown_names_exit_2_with_one_line() -> None:
    for args in (["--gpu", "V10"], ["--region", "us-east-9"], ["--provider", "ibm"]):
        result = runner.invoke(app, ["catalog", "offers", *args])
        assert result.exit_code == 2, (args, result.output)
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "unknown" in lines[0]
    result = runner.invoke(app, ["catalog", "offers", "--gpu", "V10"])
    assert "V100" in result.stderr


def test_import_then_use_offers(tmp_path: Path) -> None:
    out = tmp_path / "offers.csv"
    result = runner.invoke(
        app,
        [
            "catalog",
            "import-skypilot",
            str(FIX / "gcp_vms.csv"),
            "--cloud",
            "gcp",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["imported"] == 8 and data["skipped"] == 4
    result = runner.invoke(
        app,
        [
            "catalog",
            "offers",
            "--offers",
            str(out),
            "--gpu",
            "T4",
            "--region",
            "us-central1",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    types = {o["instance_type"] for o in json.loads(result.stdout)["offers"]}
    assert "n1-standard-8+4xT4" in types
    plain = runner.invoke(
        app,
        [
            "catalog",
            "import-skypilot",
            str(FIX / "aws_vms.csv"),
            "--cloud",
            "aws",
            "--out",
            str(tmp_path / "a.csv"),
        ],
    )
    assert plain.exit_code == 0 and "imported 5 offers, skipped 3 rows" in plain.stdout


def test_import_bad_cloud_and_bad_offers_file(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "catalog",
            "import-skypilot",
            str(FIX / "aws_vms.csv"),
            "--cloud",
            "ibm",
            "--out",
            str(tmp_path / "o.csv"),
        ],
    )
    assert result.exit_code == 2
    assert "cloud: must be one of aws, gcp, azure (got 'ibm'); e.g. --cloud aws" in result.output
    bad = tmp_path / "bad.csv"
    bad.write_text("provider,region\n")
    result = runner.invoke(app, ["catalog", "offers", "--offers", str(bad)])
    assert result.exit_code == 2 and "bad.csv" in result.stderr


def test_mig_lists_the_19_documented_a100_layouts() -> None:
    argv = ["catalog", "mig", "--gpu", "A100", "--profile", "1g.5gb,2g.10gb,3g.20gb,4g.20gb"]
    result = runner.invoke(app, [*argv, "--profile", "7g.40gb", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["gpu"] == "A100-40GB" and data["count"] == 19
    assert "4g.20gb@0 + 3g.20gb@4" in data["layouts"] and data["checked"] is None
    table = runner.invoke(app, argv)
    assert table.exit_code == 0 and "full layouts" in table.stdout


def test_mig_checks_a_layout_and_prices_its_slices() -> None:
    argv = ["catalog", "mig", "--gpu", "A100-40GB", "--layout", "3g.20gb,1g.5gb", "--price", "7"]
    result = runner.invoke(app, [*argv, "--json"])
    assert result.exit_code == 0, result.output
    checked = json.loads(result.stdout)["checked"]
    assert checked["layout"] == "3g.20gb@0 + 1g.5gb@4"
    # weights 4/8 and 1/7 of the 7 US$/h GPU
    assert checked["prices_usd_per_hour"] == [7 * 7 / 9, 7 * 2 / 9]
    assert "valid: 3g.20gb@0 + 1g.5gb@4" in runner.invoke(app, argv).stdout


def test_mig_json_gives_the_gpu_price_as_a_number() -> None:
    """QA 35 S #15: ``gpu_price`` is a text; its figure has its own ``_usd_per_hour`` key."""
    argv = ["catalog", "mig", "--gpu", "A100-40GB", "--layout", "3g.20gb", "--json"]
    data = json.loads(runner.invoke(app, argv).stdout)
    price = data["gpu_price_usd_per_hour"]
    assert isinstance(price, float) and data["gpu_price"].startswith(f"{price:.4g} US$/h")
    assert sum(data["checked"]["prices_usd_per_hour"]) <= price
    given = json.loads(runner.invoke(app, [*argv, "--price", "7"]).stdout)
    assert given["gpu_price_usd_per_hour"] == 7.0


def test_mig_json_dates_its_rows_as_other_catalog_json_does() -> None:
    """QA 38 C #11: `catalog mig --json` had source_url but no as_of (gpus, offers have it):
    the data file's dates, per profile and the GPU's latest, and the text's source line."""
    import csv
    import io
    from importlib import resources

    shipped = resources.files("gpucast.catalog").joinpath("data", "mig_profiles.csv").read_text()
    rows = csv.DictReader(io.StringIO(shipped))
    dates = {r["name"]: r["as_of"] for r in rows if r["gpu"] == "A100-40GB"}
    data = json.loads(runner.invoke(app, ["catalog", "mig", "--gpu", "A100-40GB", "--json"]).stdout)
    assert {p["name"]: p["as_of"] for p in data["profiles"]} == dates
    assert data["as_of"] == max(dates.values()) and data["source_url"].startswith("https://")
    text = runner.invoke(app, ["catalog", "mig", "--gpu", "A100-40GB"]).stdout
    assert f"(as of {data['as_of']})" in " ".join(text.split())


def test_mig_invalid_layout_is_one_line_exit_2() -> None:
    result = runner.invoke(app, ["catalog", "mig", "--gpu", "A100-40GB", "--layout", "3g.20gb@1"])
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert "\n" not in line and "rule placement" in line
    assert runner.invoke(app, ["catalog", "mig", "--gpu", "V100"]).exit_code == 2
    # --profile names the flag, not a layout rule (QA 40 M #10)
    result = runner.invoke(app, ["catalog", "mig", "--gpu", "A100-40GB", "--profile", "bogus"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: profile: 'bogus' is not a MIG profile of A100-40GB")


def test_mig_layout_outside_its_profiles_is_refused_in_python_and_on_the_cli() -> None:
    """QA 37 FO#2: ``--layout 3g.20gb,2g.10gb --profile 1g.5gb`` checked a layout of profiles
    --profile left out; refused in one line naming both; a layout within them is honoured."""
    import gpucast
    from gpucast.domain.errors import InvalidSpecError

    argv = ["catalog", "mig", "--gpu", "A100-40GB", "--layout", "3g.20gb,2g.10gb"]
    result = runner.invoke(app, [*argv, "--profile", "1g.5gb"])
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "\n" not in line and "--layout uses 3g.20gb, 2g.10gb, not among --profile" in line
    with pytest.raises(InvalidSpecError, match=r"not among --profile 1g\.5gb"):
        gpucast.catalog_mig(gpu="A100-40GB", layout=["3g.20gb", "2g.10gb"], profiles=["1g.5gb"])
    both = runner.invoke(app, [*argv, "--profile", "3g.20gb,2g.10gb", "--json"])
    assert both.exit_code == 0, both.output
    data = json.loads(both.stdout)
    assert data["checked"] and data["count"] >= 1


@pytest.mark.parametrize("layout", ["", " , "])
def test_mig_empty_layout_is_refused_not_read_as_no_layout(layout: str) -> None:
    """QA 35 S #19: ``--layout ''`` listed all 78 A100 layouts."""
    result = runner.invoke(app, ["catalog", "mig", "--gpu", "A100-40GB", "--layout", layout])
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert line.startswith("error: layout: is empty") and "e.g. --layout 3g.20gb" in line


def test_catalog_gpus_and_catalog_mig_agree_on_which_gpus_have_mig_layouts() -> None:
    # QA: A30 shown without MIG; B200 listed with 6 profiles that `catalog mig` refused
    table = runner.invoke(app, ["catalog", "gpus"], terminal_width=250).stdout
    rows = {line.split("│")[1].strip(): line for line in table.splitlines() if "│" in line}
    assert rows["B200"].split("│")[15].strip() == "no placements"
    assert rows["A30"].split("│")[15].strip() == "3"
    b200 = runner.invoke(app, ["catalog", "mig", "--gpu", "B200"])
    assert b200.exit_code == 2 and "no published MIG placements for B200" in b200.stderr
    a30 = runner.invoke(app, ["catalog", "mig", "--gpu", "A30", "--json"])
    assert a30.exit_code == 0, a30.output
    data = json.loads(a30.stdout)
    assert (data["compute_slices"], data["memory_slices"], data["count"]) == (4, 4, 5)
    assert "1/4" in runner.invoke(app, ["catalog", "mig", "--gpu", "A30"]).stdout


def test_a_gpu_without_node_shapes_says_so_instead_of_an_empty_table() -> None:
    # QA: `catalog systems --gpu K80` printed an empty table titled "0 node shapes"
    result = runner.invoke(app, ["catalog", "systems", "--gpu", "K80"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and "node shapes" not in result.output.split("warning")[0]
    said = " ".join(result.stderr.split())
    assert said.startswith("warning: no node shape in catalog/data/systems.csv has a K80;")
    assert "H100-SXM" in said and "gpucast catalog offers --gpu K80" in said
    data = json.loads(runner.invoke(app, ["catalog", "systems", "--gpu", "K80", "--json"]).stdout)
    assert data["count"] == 0 and len(data["warnings"]) == 1
    h100 = json.loads(runner.invoke(app, ["catalog", "systems", "--gpu", "H100", "--json"]).stdout)
    assert h100["count"] > 0 and h100["warnings"] == []


def test_import_says_what_it_assumed(tmp_path: Path) -> None:
    """QA session 38: an unknown instance type's network (10 Gbit/s) and a dropped spot price
    were silent; now one warning line each on stderr, and the same lines in --json."""
    vms = tmp_path / "vms.csv"
    vms.write_text(
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,SpotPrice,Region\n"
        "p9.new,V100,8,96,768,30,40,us-east-1\n"
    )
    args = ["catalog", "import-skypilot", str(vms), "--cloud", "aws", "--out", str(tmp_path / "o")]
    plain = runner.invoke(app, args)
    assert plain.exit_code == 0, plain.output
    text = " ".join(plain.stderr.split())  # the console wraps long lines
    assert text.count("warning:") == 2
    assert "warning: network_gbps: 10 Gbit/s assumed for 1 of 1 offers (p9.new in" in text
    assert "warning: spot_usd_per_hour: above the on-demand price (a stale quote)" in text
    data = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert [w.split(":")[0] for w in data["warnings"]] == ["network_gbps", "spot_usd_per_hour"]


def test_mig_says_how_the_profile_table_prices_a_slice() -> None:
    """QA session 38: the profile table priced 4g.20gb at the whole A100 (a GPU of that profile
    alone) while the line under it gave only the layout rule, which prices it at 4/7."""
    result = runner.invoke(app, ["catalog", "mig", "--gpu", "A100-40GB", "--price", "7"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "│ 4g.20gb │ 4/7 │ 4/8 │ 20 │ 56 │ 1 │ 0 │ 51.9 │ 50.0 │ 7.0000 │" in text
    assert "(the profile table's: a GPU filled with that profile alone, price / max)" in text


@pytest.mark.parametrize(
    ("argv", "key"), [(["gpus"], "gpus"), (["offers", "--gpu", "T4"], "offers")]
)
def test_tables_name_their_sources_in_a_footnote(argv: list[str], key: str) -> None:
    """QA 38 C #10: `catalog gpus` / `offers` tables showed no source (only --json had each
    row's source_url). A footnote names the sites with their row counts, which add up to the
    rows shown whose prices were read (F2: an estimated row's page is not its source)."""
    import re

    rows = json.loads(runner.invoke(app, ["catalog", *argv, "--json"]).stdout)[key]
    text = " ".join(runner.invoke(app, ["catalog", *argv]).stdout.split())
    note = re.search(r"sources \(rows\): (.*?); each row's source_url in --json", text)
    assert note is not None, text
    counts = [int(part.rsplit(" ", 1)[1]) for part in note.group(1).split(", ")]
    read = [r for r in rows if not r.get("price_estimated")]  # estimated rows: not read
    assert sum(counts) == len(read) and counts == sorted(counts, reverse=True)
    if key == "offers":
        assert "github.com/skypilot-org/skypilot-catalog" in note.group(1)


def test_estimated_offers_are_not_counted_as_read_from_their_source() -> None:
    # F2 left: Azure rows labelled "(estimated): prices not read from any source" were counted
    # under "sources (rows)" by their source_url (the vendor's price page)
    result = CliRunner().invoke(
        app, ["catalog", "offers", "--provider", "azure"], env={"COLUMNS": "400"}
    )
    assert result.exit_code == 0, result.output
    import gpucast

    offers = gpucast.catalog_offers(provider="azure").offers
    guessed = sum(o.price_estimated for o in offers)
    assert guessed and guessed < len(offers)
    sources = next(line for line in result.output.splitlines() if "sources (rows):" in line)
    assert "azure.microsoft.com" not in sources
    assert f"(estimated): {guessed} rows' prices not read from any source" in result.output


def test_catalog_spot_gives_every_scenario_a_hazard_as_its_text_does() -> None:
    """QA 39 K #14: the optimistic scenario's hazard_per_node_hour was null in --json (it
    takes --interruption-band); now the default band's figure and where it comes from."""
    from gpucast.predict.revocation import hazard_from_interruption_band

    out = runner.invoke(app, ["catalog", "spot", "--json"])
    assert out.exit_code == 0, out.output
    by_name = {s["name"]: s for s in json.loads(out.stdout)["scenarios"]}
    band = hazard_from_interruption_band("5-10%").hazard_per_hour
    optimistic = by_name["optimistic"]
    assert optimistic["hazard_per_node_hour"] == pytest.approx(band)
    assert optimistic["hazard_source"].startswith("the --interruption-band of plan/simulate")
    assert by_name["pessimistic"]["hazard_source"] == "spot_scenarios.csv"
    text = runner.invoke(app, ["catalog", "spot"]).stdout
    line = next(ln for ln in text.splitlines() if ln.startswith("optimistic"))
    assert f"{band * 24:.3g} revocations/node/24 h (the --interruption-band, default 5-10%" in line
