"""`gpucast plan train` and `gpucast report` through Typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app as cli

runner = CliRunner()
SMALL = ["--workload", "cifar-resnet20", "--epochs", "10", "--dataset-size", "50000"]


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # no published data unless asked for (profiles and fits: the run's cache, conftest)
    monkeypatch.delenv("GPUCAST_SHARED_DATA", raising=False)
    monkeypatch.chdir(tmp_path)


def assumed(plan: dict, name: str) -> str:  # type: ignore[type-arg]
    """The value and source of the plan's assumption called ``name``."""
    found = [a for a in plan["assumptions"] if a["name"] == name]
    assert len(found) == 1, [a["name"] for a in plan["assumptions"]]
    return f"{found[0]['value']} ({found[0]['source']})"


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(cli, list(args))
    return result.exit_code, result.output


def test_json_has_the_documented_shape() -> None:
    code, out = invoke("plan", "train", *SMALL, "--deadline", "2h", "--json")
    assert code == 0, out
    data = json.loads(out)
    for key in ("candidates", "pareto", "recommended", "infeasible"):
        assert key in data
    assert data["candidates"] and data["pareto"]
    assert 0 <= data["recommended"] < len(data["candidates"])
    for c in data["candidates"]:
        for key in (
            "provider",
            "region",
            "instance_type",
            "gpu",
            "gpus",
            "nodes",
            "market",
            "strategy",
            "time_s",
            "cost_usd",
            "bottleneck",
        ):
            assert key in c
        if c["market"] == "spot":
            assert c["time_p90_s"] is not None and c["p_meet_deadline"] is not None
            assert c["mc_runs"] >= 1000
    assert all(0 <= i < len(data["candidates"]) for i in data["pareto"])
    assert isinstance(data["infeasible"], dict)


def test_table_output_and_report_and_saved_plan(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    saved = tmp_path / "plan.json"
    code, out = invoke(
        "plan", "train", *SMALL, "--budget", "50", "--report", str(report), "--save", str(saved)
    )
    assert code == 0, out
    assert "recommended" in out and "Pareto" in out
    html = report.read_text(encoding="utf-8")
    assert 'id="pareto-plot"' in html and 'id="candidates"' in html
    again = tmp_path / "again.html"
    code, out = invoke("report", "--plan", str(saved), "--out", str(again))
    assert code == 0, out
    assert again.read_text(encoding="utf-8") == html


def test_yaml_config_and_flags_override(tmp_path: Path) -> None:
    cfg = tmp_path / "plan.yaml"
    cfg.write_text(
        "workload: cifar-resnet20\nepochs: 10\ndataset-size: 50000\ndeadline: 2h\n"
        "gpu: [T4, L4]\nspot: false\nmax_gpus: 8\n",
        encoding="utf-8",
    )
    code, out = invoke("plan", "train", "--config", str(cfg), "--json")
    assert code == 0, out
    data = json.loads(out)
    assert {c["gpu"] for c in data["candidates"]} <= {"T4", "L4"}
    assert all(c["market"] == "on-demand" and c["gpus"] <= 8 for c in data["candidates"])
    code, out = invoke("plan", "train", "--config", str(cfg), "--gpu", "A10G", "--json")
    assert code == 0, out
    assert {c["gpu"] for c in json.loads(out)["candidates"]} == {"A10G"}


def test_unknown_yaml_key_names_it(tmp_path: Path) -> None:
    cfg = tmp_path / "plan.yaml"
    cfg.write_text("workload: resnet50\ndeadlin: 2h\n", encoding="utf-8")
    code, out = invoke("plan", "train", "--config", str(cfg))
    assert code == 2
    assert "deadlin" in out and "deadline" in out
    assert len(out.strip().splitlines()) == 1
    # QA 35 S #20: with its line, as a bad value's error has
    assert " ".join(out.split()).startswith(
        f"error: {cfg}, line 2, key 'deadlin': is not an option of plan train; did you mean"
    )


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        (
            "plan.yaml",
            "workload: resnet50\nmax_gpus: 8\ndeadline: 2h\nmax_gpus: 4\n",
            "plan.yaml, line 4: key 'max_gpus' is given twice (lines 2 and 4); YAML would "
            "silently keep the last; keep one 'max_gpus' line and delete the other",
        ),
        (
            "plan.yaml",
            "workload: resnet50\nmax_gpus: 8\nmax-gpus: 4\n",
            "plan.yaml, line 3: 'max_gpus' and 'max-gpus' both set max_gpus (lines 2 and 3); "
            "keep one of them",
        ),
        (
            "plan.toml",
            'workload = "resnet50"\nmax_gpus = 8\nmax_gpus = 4\n',
            "plan.toml, line 3: key 'max_gpus' is given twice (lines 2 and 3); keep one",
        ),
        (
            "plan.toml",
            'workload = "resnet50"\n[cluster]\ngpu = "H100"\n\n[cluster]\nnodes = 2\n',
            "plan.toml, line 5: table [cluster] is declared twice (lines 2 and 5); merge the two "
            "[cluster] tables into one",
        ),
    ],
)
def test_a_config_key_given_twice_is_one_line_and_exit_2(
    tmp_path: Path, name: str, text: str, needle: str
) -> None:
    cfg = tmp_path / name
    cfg.write_text(text, encoding="utf-8")
    code, out = invoke("plan", "train", "--config", str(cfg))
    assert code == 2, out
    assert needle in " ".join(out.split())
    assert out.strip().startswith("error: ")


def test_a_bad_value_in_a_config_file_names_the_file_and_line(tmp_path: Path) -> None:
    """QA 34 #12: `epochs = -3` in a config named no file or line (unknown and repeated keys
    did); a flag given beside the file is still named as the flag."""
    cfg = tmp_path / "c.toml"
    cfg.write_text('workload = "resnet50"\nepochs = -3\n', encoding="utf-8")
    code, out = invoke("plan", "train", "--config", str(cfg))
    assert code == 2, out
    assert " ".join(out.split()).startswith(
        f"error: {cfg}, line 2, key 'epochs': must be a finite number > 0 (got -3.0)"
    )
    code, out = invoke("plan", "train", "--config", str(cfg), "--epochs", "-5")
    assert code == 2 and out.strip().startswith("error: epochs: must be"), out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--gpu", "H101"], "unknown GPU 'H101'"),
        (["--region", "us-east-9"], "unknown region"),
        (["--gpu", "T4", "--exclude-gpu", "T4"], "both required and excluded"),
        (["--batch-size", "32", "--global-batch", "256"], "not both"),
        (["--deadline", "1s"], "relax --deadline"),
        # the budget binds, not the deadline most rows miss: the message says so
        (["--no-spot", "--deadline", "10m", "--budget", "0.001"], "every plan is over the budget"),
        (["--deadline", "soon"], "deadline"),
        (["--objective", "best"], "objective"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str) -> None:
    code, out = invoke("plan", "train", *SMALL, *args)
    assert code == 2, out
    assert needle in out
    assert len(out.strip().splitlines()) == 1


def test_report_needs_one_source(tmp_path: Path) -> None:
    code, out = invoke("report", "--out", str(tmp_path / "x.html"))
    assert code == 2 and "exactly one source" in out
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    code, out = invoke("report", "--plan", str(bad), "--out", str(tmp_path / "x.html"))
    assert (
        code == 2 and "not a saved plan (no 'request', 'candidates' or 'schema_version' key)" in out
    )


def test_report_from_the_store(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from gpucast.domain.measurement import EnvironmentFingerprint, Measurement
    from gpucast.domain.workload import WorkloadSpec
    from gpucast.store.db import open_store

    db = tmp_path / "m.db"
    env = EnvironmentFingerprint(
        host="h",
        os="linux",
        python_version="3.11",
        cpu_model="cpu",
        cpu_cores=2,
        torch_threads=2,
        torch_version="2",
    )
    m = Measurement(
        spec=WorkloadSpec(name="mlp<b>", batch_size=8),
        mode="train",
        device="cpu",
        step_times_s=(0.01, 0.011, 0.012),
        samples_per_step=8,
        stop_reason="ci_reached",
        target_ci=0.05,
        environment=env,
        created_at=datetime.now(UTC),
    )
    with open_store(db) as store:
        store.save_measurement(m)
    out_html = tmp_path / "runs.html"
    code, out = invoke("--db", str(db), "report", "--runs", "--out", str(out_html))
    assert code == 0, out
    html = out_html.read_text(encoding="utf-8")
    assert 'id="runs-plot"' in html and "mlp&lt;b&gt;" in html and "mlp<b>" not in html
    assert "warning" not in out
    # QA: a report of no run was written without a word
    code, out = invoke("--db", str(db), "report", "--runs", "--workload", "nope", "--out",
                       str(out_html))  # fmt: skip
    assert code == 0, out
    assert f"warning: the report is empty: {db} holds no run of workload 'nope'; it holds 1" in (
        " ".join(out.split())
    )


def test_readme_main_job_on_defaults() -> None:
    """`gpucast plan train --workload resnet50` alone: 90 epochs of ImageNet, 24 h deadline
    (its speed is benchmarks/plan_speed.py's business, not a unit test's)."""
    code, out = invoke("plan", "train", "--workload", "resnet50", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["request"]["epochs"] == 90 and data["request"]["dataset_size"] == 1281167
    assert data["request"]["deadline_s"] == 24 * 3600
    best = data["candidates"][data["recommended"]]
    assert best["time_s"] <= 24 * 3600 or best["p_meet_deadline"] >= 0.9


@pytest.mark.shared_data
def test_published_lifetimes_and_startup_are_used(shared_data: Path) -> None:
    code, out = invoke(
        "plan",
        "train",
        *SMALL,
        "--gpu",
        "K80",
        "--provider",
        "gcp",
        "--region",
        "us-east1",
        "--data-dir",
        str(shared_data),
        "--deadline",
        "30h",
        "--min-p-meet",
        "0",
        "--json",
    )
    assert code == 0, out
    data = json.loads(out)
    fitted = {m["name"]: m["fitted_on"] for m in data["models"]}
    assert "lifetime.csv" in fitted["spot lifetimes (predict.revocation)"]
    assert "cmdare/startup_time" in assumed(data, "start-up")
    assert any(c["market"] == "spot" for c in data["candidates"])


def _train_measurement(  # type: ignore[no-untyped-def]
    workload: str, batch: int, step_s: float, gpu_name: str | None = None
):
    from datetime import UTC, datetime

    from gpucast.domain.measurement import EnvironmentFingerprint, Measurement
    from gpucast.domain.workload import WorkloadSpec

    env = EnvironmentFingerprint(
        host="h",
        os="linux",
        python_version="3.11",
        cpu_model="cpu",
        cpu_cores=2,
        torch_threads=2,
        torch_version="2",
        gpu_name=gpu_name,
    )
    return Measurement(
        spec=WorkloadSpec(name=workload, batch_size=batch),
        mode="train",
        device="cpu" if gpu_name is None else "cuda",
        step_times_s=(step_s, step_s * 1.01, step_s * 0.99),
        samples_per_step=batch,
        stop_reason="ci_reached",
        target_ci=0.05,
        environment=env,
        created_at=datetime.now(UTC),
    )


def test_profile_saves_to_the_store_and_plans_from_it(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    code, out = invoke("--db", str(db), "profile", "cifar-resnet20", "-b", "8", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert isinstance(data["run_id"], int) and data["workload"] == "cifar-resnet20"
    from gpucast.domain.profile import WorkloadProfile
    from gpucast.store.db import open_store

    with open_store(db) as store:
        run = store.get_run(data["run_id"])
        assert run.kind == "profile"
        saved = WorkloadProfile.from_dict(run.result)
    assert (
        saved.to_dict()
        == WorkloadProfile.from_dict({k: v for k, v in data.items() if k != "run_id"}).to_dict()
    )
    # plan from the stored profile: no profiling, the family from the stored name
    code, out = invoke(
        "--db", str(db), "plan", "train", "--workload", f"run:{data['run_id']}",
        "--epochs", "10", "--deadline", "2h", "--no-spot", "--json",
    )  # fmt: skip
    assert code == 0, out
    plan = json.loads(out)
    assert plan["request"]["workload"] == "cifar-resnet20"
    assert f"store run #{data['run_id']}" in assumed(plan, "workload profile")
    assert assumed(plan, "step-time calibration").startswith("none")
    # --no-save writes nothing
    other = tmp_path / "other.db"
    code, out = invoke("--db", str(other), "profile", "mlp", "-b", "4", "--no-save", "--json")
    assert code == 0, out
    assert json.loads(out)["run_id"] is None and not other.exists()


def test_stored_measurements_calibrate_the_plan(tmp_path: Path) -> None:
    from gpucast.store.db import open_store

    db = tmp_path / "m.db"
    args = [*SMALL, "--deadline", "2h", "--no-spot", "--json"]
    code, out = invoke("--db", str(db), "plan", "train", *args)
    assert code == 0, out
    before = json.loads(out)
    with open_store(db) as store:
        cpu_id = store.save_measurement(_train_measurement("cifar-resnet20", 32, 0.05))
    code, out = invoke("--db", str(db), "plan", "train", *args)
    assert code == 0, out
    on_cpu = json.loads(out)  # a CPU run calibrates no GPU: the plan as before, and says why
    assert on_cpu["candidates"] == before["candidates"]
    said = assumed(on_cpu, "step-time calibration")
    assert "store run" not in said.split(" (")[0]  # every precision: none
    # named for every precision planned (fp32 and bf16 here), measured at fp32
    assert said.count(f"store run #{cpu_id} (cpu, batch 32, fp32") == 2
    assert said.count("calibrates no GPU prediction, at any precision") == 2
    on_t4 = [*args, "--gpu", "T4"]  # fp32 there, the precision measured
    code, out = invoke("--db", str(db), "plan", "train", *on_t4)
    assert code == 0, out
    before = json.loads(out)
    with open_store(db) as store:
        run_id = store.save_measurement(_train_measurement("cifar-resnet20", 32, 0.05, "T4"))
        store.save_measurement(_train_measurement("other-model", 32, 9.0, "T4"))  # not this
    code, out = invoke("--db", str(db), "plan", "train", *on_t4)
    assert code == 0, out
    after = json.loads(out)
    roofline = next(m for m in after["models"] if m["name"].startswith("roofline"))
    assert f"store run #{run_id}" in roofline["fitted_on"]
    assert f"store run #{run_id}" in assumed(after, "step-time calibration")

    def width(plan: dict) -> float:  # type: ignore[type-arg]
        c = plan["candidates"][plan["recommended"]]
        return (c["time_upper_s"] - c["time_lower_s"]) / c["time_s"]

    assert width(after) < width(before)  # a GPU measurement's band, not the uncalibrated one
    # the measurement itself as the workload
    code, out = invoke("--db", str(db), "plan", "train", "--workload", f"run:{run_id}",
                       "--epochs", "10", "--deadline", "2h", "--no-spot", "--json")  # fmt: skip
    assert code == 0, out
    assert json.loads(out)["request"]["workload"] == "cifar-resnet20"


@pytest.mark.parametrize(
    ("workload", "needle"),
    [("run:999", "no run with id 999"), ("run:x", "positive run id")],
)
def test_unknown_stored_workload_is_one_line(tmp_path: Path, workload: str, needle: str) -> None:
    from gpucast.store.db import open_store

    db = tmp_path / "s.db"
    with open_store(db) as store:
        store.save_measurement(_train_measurement("mlp", 8, 0.01))
    code, out = invoke("--db", str(db), "plan", "train", "--workload", workload, "--epochs", "1",
                       "--dataset-size", "100")  # fmt: skip
    assert code == 2, out
    assert needle in out and len(out.strip().splitlines()) == 1


def test_allow_mixed_json_lists_workers() -> None:
    code, out = invoke(
        "plan", "train", *SMALL, "--deadline", "3h", "--allow-mixed", "--no-spot",
        "--provider", "aws", "--region", "us-east-1", "--gpu", "T4", "--gpu", "A10G",
        "--max-gpus", "8", "--json",
    )  # fmt: skip
    assert code == 0, out
    data = json.loads(out)
    assert all("workers" in c for c in data["candidates"])
    mixed = [c for c in data["candidates"] if "+" in c["gpu"]]
    assert mixed, [c["gpu"] for c in data["candidates"]]
    for c in mixed:
        assert {w["gpu"] for w in c["workers"]} == set(c["gpu"].split("+"))
        if c["strategy"] != "ps":
            assert sum(w["samples_per_step"] for w in c["workers"]) == c["global_batch"]


def test_a_crafted_store_cannot_run_code(tmp_path: Path) -> None:
    """A measurement naming user code (here a module that would write a file on import) is
    refused: the store is data; only --trust-workload lets gpucast import what it names."""
    from gpucast.store.db import open_store

    marker = tmp_path / "pwned"
    evil = tmp_path / "evil_module.py"
    evil.write_text(
        f"open({str(marker)!r}, 'w').write('ran')\n"
        "def factory():\n    raise SystemExit('imported')\n"
    )
    db = tmp_path / "store.db"
    with open_store(db) as store:
        run_id = store.save_measurement(_train_measurement(f"{evil}:factory", 8, 0.1))
    code, out = invoke("--db", str(db), "plan", "train", "--workload", f"run:{run_id}",
                       "--epochs", "1", "--dataset-size", "1000")  # fmt: skip
    assert code == 2, out
    assert "names user code" in out and "--trust-workload" in out
    assert not marker.exists()


def test_spot_without_data_shows_both_scenarios() -> None:
    """AWS has no lifetime data here: the plan ranks spot by the pessimistic scenario and
    shows the optimistic outcome beside it (JSON and terminal)."""
    code, out = invoke(
        "plan", "train", *SMALL, "--provider", "aws", "--gpu", "T4", "--deadline", "none", "--json"
    )
    assert code == 0, out
    data = json.loads(out)
    spot = [c for c in data["candidates"] if c["market"] == "spot"]
    assert spot and all(set(c["scenarios"]) == {"pessimistic", "optimistic"} for c in spot)
    for c in spot:  # the candidate's own figures are the ranking (pessimistic) scenario's
        assert c["time_s"] == pytest.approx(c["scenarios"]["pessimistic"]["time_s"])
        assert c["scenarios"]["optimistic"]["time_s"] <= c["time_s"] * 1.05
    lifetimes = next(a for a in data["assumptions"] if a["name"] == "spot lifetimes")
    assert "pessimistic" in lifetimes["value"] and "--lifetimes" in lifetimes["override"]
    code, out = invoke(
        "plan", "train", *SMALL, "--provider", "aws", "--gpu", "T4", "--deadline", "none",
        "--report", "r.html",
    )  # fmt: skip
    assert code == 0, out
    assert "no lifetime data: pessimistic scenario" in out
    assert 'id="scenarios"' in Path("r.html").read_text(encoding="utf-8")


def test_limit_columns_and_candidates_csv(tmp_path: Path) -> None:
    """#21: the table takes --limit and --columns, and --csv writes every candidate."""
    import csv as csv_module

    out_csv = tmp_path / "candidates.csv"
    args = ("plan", "train", *SMALL, "--gpu", "T4", "--no-spot", "--deadline", "4h")
    code, out = invoke(*args, "--columns", "instance,cost", "--limit", "3", "--csv", str(out_csv))
    assert code == 0, out
    header = next(line for line in out.splitlines() if "instance" in line)
    assert "cost" in header and "bound by" not in header and "market" not in header
    with out_csv.open(encoding="utf-8") as handle:
        rows = list(csv_module.DictReader(handle))
    code, full = invoke(*args, "--json")
    assert len(rows) == len(json.loads(full)["candidates"]) >= 1
    assert {"instance_type", "time_s", "cost_usd", "recommended"} <= set(rows[0])
    assert "--limit N shows more" in out or len(rows) <= 3


def _shown_rows(out: str) -> dict[int, str]:
    """Candidate index -> its table row (the '#' cell: index with > and * marks)."""
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if cells and cells[0].lstrip(">*").isdigit():
            rows[int(cells[0].lstrip(">*"))] = line
    return rows


def _table_header(out: str) -> str:
    return next(line for line in out.splitlines() if "instance" in line)


def test_energy_and_carbon_columns_and_the_pick_is_always_in_the_table() -> None:
    """--objective carbon on AWS: the pick (#20) and most of the Pareto front sort after the
    20 cheapest rows; the table kept the 20 cheapest and dropped them. kWh and kg CO2e are
    columns (energy / carbon, or kwh / co2)."""
    args = ("plan", "train", "--workload", "resnet50", "--epochs", "1", "--dataset-size",
            "1281167", "--deadline", "24h", "--provider", "aws",
            "--objective", "carbon")  # fmt: skip
    code, out = invoke(*args, "--json")
    assert code == 0, out
    data = json.loads(out)
    must = {*data["pareto"], data["recommended"]}
    assert len(data["candidates"]) > 20 and max(must) >= 20  # the case the table lost
    code, table = invoke(*args, "--columns", "instance,cost,kwh,co2")
    assert code == 0, table
    header = next(line for line in table.splitlines() if "instance" in line)
    assert "kWh" in header and "kg CO2e" in header and "bound by" not in header
    rows = _shown_rows(table)
    assert must <= set(rows) and len(rows) == max(20, len(must))
    pick = data["candidates"][data["recommended"]]
    assert f">{data['recommended']}" in rows[data["recommended"]]
    cells = [c.strip() for c in rows[data["recommended"]].strip("│ ").split("│")]
    assert cells[-2:] == [f"{pick['energy_kwh']:.3g}", f"{pick['co2e_kg']:.3g}"]
    code, few = invoke(*args, "--columns", "instance,energy,carbon", "--limit", "3")
    assert code == 0, few
    assert set(_shown_rows(few)) == must  # the front and the pick, however small the limit
    code, default = invoke(*args)  # the objective's figures are shown by default
    assert code == 0 and "kWh" in default and "kg CO2e" in default
    assert must <= set(_shown_rows(default))
    code, cheapest = invoke(*args[:-1], "cheapest")
    assert code == 0 and "kWh" not in _table_header(cheapest)


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--columns", "instance,tarot"], "tarot"),
        (["--limit", "0"], "limit"),
        (["--csv", "prof.json"], "input file"),
    ],
)
def test_table_options_are_checked_before_planning(
    tmp_path: Path, extra: list[str], needle: str
) -> None:
    (tmp_path / "prof.json").write_text("{}", encoding="utf-8")
    result = runner.invoke(cli, ["plan", "train", *SMALL, "--profile", "prof.json", *extra])
    assert result.exit_code == 2 and needle in result.stderr
    assert (tmp_path / "prof.json").read_text(encoding="utf-8") == "{}"


def test_plan_llm_train_says_why_a_node_count_of_the_cluster_has_no_row() -> None:
    """QA session 37: --cluster DGX-H100 --nodes 3 with tp=2, pp=1 fixed showed 1 and 2 nodes
    and nothing about 3 (no layout of 24 GPUs divides the batch of 512): the text now says
    why, as --json's ``infeasible`` and the HTML report did."""
    args = [
        "plan", "llm-train", "--model", "llama-3-8b", "--tokens", "2e10", "--seq-len", "8192",
        "--global-batch", "512", "--tp", "2", "--pp", "1", "--cluster", "DGX-H100",
        "--nodes", "3",
    ]  # fmt: skip
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert result.stdout.count("  dropped: ") == 1  # the terminal may wrap the line
    data = json.loads(runner.invoke(cli, [*args, "--json"]).stdout)
    (why,) = data["infeasible"]
    assert why.startswith("no valid layout of 24 GPUs")
    assert f"dropped: {why}" in " ".join(result.stdout.split())


def test_plan_llm_train_without_a_row_in_time_is_one_line_and_exit_2() -> None:
    """As plan train: no row meets the deadline -- one line naming the limit that cut the
    most rows and the fastest row, exit 2 (it printed the rows and exited 0)."""
    result = runner.invoke(cli, [
        "plan", "llm-train", "--model", "llama-3-8b", "--tokens", "2e11", "--global-batch",
        "512", "--deadline", "7d", "--cluster", "DGX-H100", "--nodes", "2",
        "--price-per-gpu-hour", "2.5",
    ])  # fmt: skip
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert line.startswith("error: no feasible plan: 'misses the deadline' cut the most ")
    assert "\n" not in line and "Traceback" not in result.output and result.stdout == ""
    assert "the fastest plan takes " in line
    assert "(on-prem/local 2x DGX-H100, 16 H100-SXM, $" in line
    assert "relax --deadline to at least " in line and "--nodes on a --cluster" in line


def test_plan_llm_train_with_a_fixed_layout_states_it_and_what_it_left_out() -> None:
    result = runner.invoke(cli, [
        "plan", "llm-train", "--model", "llama-3-8b", "--tokens", "2e9", "--seq-len", "4096",
        "--global-batch", "256", "--max-gpus", "16", "--gpu", "H100", "--gpu", "T4",
        "--tp", "8", "--pp", "1", "--precision", "fp16",  # the T4 has no bf16 units
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    rows = [line for line in result.output.splitlines() if "rdma): " in line]
    assert rows and all(" tp=8 pp=1 " in line for line in rows)
    assert (
        "assumption layouts: tp=8, pp=1 fixed (--tp, --pp); the rest searched; tp=8 needs 8 "
        "GPUs per node: 1 GPU type left out (T4)"
    ) in text


def test_plan_llm_train_with_a_layout_no_offer_takes_is_one_line_and_exit_2() -> None:
    result = runner.invoke(cli, [
        "plan", "llm-train", "--model", "llama-3-8b", "--tokens", "2e11", "--global-batch",
        "512", "--tp", "32",
    ])  # fmt: skip
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line and "Traceback" not in result.output
    assert "tp=32 needs 32 GPUs per node; drop --tp to search it" in line


def test_plan_llm_train_states_short_runs_in_minutes() -> None:
    """A run of minutes reads as minutes, not "0.0 h"; a long one in days."""
    common = ["plan", "llm-train", "--model", "llama-3-8b", "--global-batch", "512",
              "--cluster", "DGX-H100", "--nodes", "2", "--price-per-gpu-hour", "2.5"]  # fmt: skip
    short = runner.invoke(cli, [*common, "--tokens", "1e8", "--deadline", "1d"])
    assert short.exit_code == 0, short.output
    assert " min, $" in short.output and "0.0 h" not in short.output
    long = runner.invoke(cli, [*common, "--tokens", "2e11", "--deadline", "90d"])
    assert long.exit_code == 0, long.output
    assert " days, $" in long.output


def test_plan_llm_train_with_spot_renders_the_spot_rows() -> None:
    result = runner.invoke(cli, [
        "plan", "llm-train", "--model", "llama-3-8b", "--tokens", "2e9", "--seq-len", "4096",
        "--global-batch", "256", "--max-gpus", "16", "--gpu", "H100", "--provider", "aws",
        "--spot", "--hazard-per-hour", "0.05", "--runs", "100", "--deadline", "2d",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "rdma, spot):" in text and "spot: P(meet)" in text and "revocations" in text
    assert " kWh, " in text and "kgCO2e" in text and "assumption energy:" in text
    assert "assumption market: on demand and spot" in text


def test_the_plan_tables_time_header_keeps_its_interval() -> None:
    """A header string is Rich markup: "time [interval]" printed as "time"."""
    result = runner.invoke(cli, ["plan", "train", *SMALL], terminal_width=250)
    assert result.exit_code == 0, result.output
    assert "time [interval]" in result.output


def test_a_recommended_spot_plan_says_its_checkpoint_interval() -> None:
    """QA 39 K #7: the terminal said 'interval by Young's formula' but not the interval of
    the recommended spot plan (only the JSON candidate's notes held it)."""
    args = ["plan", "train", *SMALL, "--provider", "aws", "--gpu", "T4", "--region",
            "us-east-1", "--deadline", "none", "--runs", "100", "--max-simulated", "3"]  # fmt: skip
    code, out = invoke(*args, "--json")
    assert code == 0, out
    plan = json.loads(out)
    best = plan["candidates"][plan["recommended"]]
    assert best["market"] == "spot"
    (said,) = [n for n in best["notes"] if "checkpoint every" in n]
    code, out = invoke(*args)
    assert code == 0, out
    assert " ".join(said.split()[:8]) in " ".join(out.split())
