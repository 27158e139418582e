"""``gpucast.predict_train|speed|cluster|checkpoint``: the planner's step time, rows in and
rows out, typed errors naming the option."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_app_fit import checkpoint_csv, cluster_folder, speed_csv

import gpucast
from gpucast.app.fit import fit_checkpoint, fit_cluster, fit_speed
from gpucast.app.predict import (
    PredictCheckpointRequest,
    PredictTrainRequest,
    predict_checkpoint,
    predict_cluster,
    predict_speed,
    predict_train,
)
from gpucast.domain.errors import DataFormatError, InvalidSpecError, UnknownGpuError

WORKLOAD = "mlp"


def _planner_step_s(batch: int, gpu: str, precision: str, db: Path | None) -> tuple[float, bool]:
    """The step time ``plan train`` uses for one worker of ``gpu`` at ``batch``: its GPU
    table (``fixed_s + per_sample_s * batch`` summed over the roofline terms, each batch at
    the scale of the stored measurement nearest it)."""
    from gpucast.catalog import load_catalog
    from gpucast.inputs.calibration import step_time_efficiency, store_calibration
    from gpucast.inputs.workload import workload_facts, workload_profile
    from gpucast.plan.inputs import build_gpu_table

    catalog = load_catalog()
    facts = workload_facts(workload_profile(WORKLOAD, precision))
    eff = step_time_efficiency().value
    cal = store_calibration(db, WORKLOAD, precision, facts, catalog, efficiency=eff)
    table = build_gpu_table(
        facts, [catalog.gpu(gpu)], calibration=None if cal is None else cal.value, efficiency=eff
    )
    step = table.step_terms(np.zeros(1, dtype=np.int64), np.array([float(batch)])).sum()
    return float(step), cal is not None


def store_measurement(
    db: Path,
    batch: int,
    step_s: float,
    gpu_name: str | None = None,
    *,
    workload: str = WORKLOAD,
    power_limit_w: float | None = None,
    power_w: float | None = None,
    options: tuple[tuple[str, object], ...] = (),
) -> None:
    """A training measurement in ``db`` (of ``workload`` built with ``options``); with
    ``power_limit_w`` (and ``power_w``, the board's average draw) the energy record a
    ``measure train --power-limits`` run leaves."""
    from gpucast.domain.measurement import EnergySummary, EnvironmentFingerprint, Measurement
    from gpucast.domain.workload import WorkloadSpec
    from gpucast.store.db import open_store

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
    energy = None
    if power_limit_w is not None:
        energy = EnergySummary(
            steps=3,
            elapsed_s=3 * step_s,
            gpu_energy_j=None if power_w is None else 3 * step_s * power_w,
            gpu_method=None if power_w is None else "nvml-counter",
            power_limit_w=power_limit_w,
        )
    measurement = Measurement(
        spec=WorkloadSpec(name=workload, batch_size=batch, options=options),
        mode="train",
        device="cpu" if gpu_name is None else "cuda",
        step_times_s=(step_s, step_s * 1.01, step_s * 0.99),
        samples_per_step=batch,
        stop_reason="ci_reached",
        target_ci=0.05,
        environment=env,
        created_at=datetime.now(UTC),
        energy=energy,
    )
    with open_store(db) as store:
        store.save_measurement(measurement)


# -- predict train --------------------------------------------------------------------------
def test_predict_train_is_the_planners_step_time(tmp_path: Path) -> None:
    """By default (auto) at the precision plan train plans the A100 at (bf16), and at fp32
    when both are asked for fp32."""
    from gpucast.catalog.validation import validation_for

    db = tmp_path / "store.db"
    for given, precision in ((None, "bf16"), ("fp32", "fp32")):
        kw = {} if given is None else {"precision": given}
        result = gpucast.predict_train(workload=WORKLOAD, batch_size=48, gpu="A100", db=db, **kw)
        planned, calibrated = _planner_step_s(48, "A100", precision, db)
        assert not calibrated and not result.calibrated and result.precision == precision
        assert result.step_time_s == pytest.approx(planned, rel=1e-9)
        assert result.gpu.startswith("A100")
        assert result.samples_per_s == pytest.approx(48 / planned)
        data = result.to_dict()
        assert data["step_time_s"]["value"] == result.step_time_s
        validated = validation_for("roofline-step", [result.gpu], precision, 1)
        assert data["validation"] == validated.to_dict()
        assert data["calibration_source"].startswith("none")


def test_a_stored_measurement_calibrates_as_in_the_planner(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    store_measurement(db, batch=8, step_s=0.004, gpu_name="A100-40GB")  # another batch
    result = predict_train(workload=WORKLOAD, precision="fp32", batch_size=32, gpu="H100", db=db)
    planned, calibrated = _planner_step_s(32, "H100", "fp32", db)
    assert calibrated and result.calibrated
    assert result.step_time_s == pytest.approx(planned, rel=1e-9)
    assert "store run #1" in result.calibration_source
    uncalibrated = predict_train(
        workload=WORKLOAD, precision="fp32", batch_size=32, gpu="H100", db=tmp_path / "x"
    )
    assert uncalibrated.step_time_s != pytest.approx(result.step_time_s)


def test_a_stored_run_calibrates_only_the_configuration_it_ran(tmp_path: Path) -> None:
    """The measure verbs store a workload at its built-in options: such a run scaled the
    roofline of ``-o hidden=4096`` by the default model's measured/roofline ratio (its step
    priced as the small one's), without a word. A configured workload is now calibrated by
    none and says why; the built-in one still is (QA 36 M #39)."""
    db = tmp_path / "store.db"
    store_measurement(db, batch=32, step_s=0.004, gpu_name="H100")
    ask = dict(workload=WORKLOAD, precision="fp32", batch_size=32, gpu="H100", db=db)
    plain = predict_train(**ask)
    assert plain.calibrated and "store run #1" in plain.calibration_source
    wide = predict_train(**ask, workload_options=(("hidden", 4096),))
    assert not wide.calibrated
    source = wide.calibration_source
    assert source.startswith("none: no stored training measurement of mlp -o hidden=4096 at fp32")
    assert "the store's runs of mlp ran at its built-in options" in source
    alone = predict_train(
        **{**ask, "db": tmp_path / "empty.db"}, workload_options=(("hidden", 4096),)
    )
    assert wide.step_time_s == pytest.approx(alone.step_time_s, rel=1e-12)
    # plan train and simulate train read the store the same way
    plan = gpucast.plan_train(
        workload=WORKLOAD, workload_options=(("hidden", 4096),), epochs=1, dataset_size=10_000,
        batch_size=32, gpus=("H100",), db=db, allow_spot=False,
    )  # fmt: skip
    said = [a for a in plan.assumptions if a.name == "step-time calibration"]
    assert said and said[0].value.startswith("none")
    assert "the store's runs of mlp ran at its built-in options" in said[0].source


def test_a_configured_run_calibrates_its_own_configuration(tmp_path: Path) -> None:
    """``measure train mlp -o hidden=4096`` stores the run as ``mlp -o hidden=4096``: it
    calibrates that configuration (options in any order or spelling), not the built-in one,
    nor another configuration (QA 36 M: the measure verbs took no ``-o``)."""
    db = tmp_path / "store.db"
    store_measurement(db, batch=32, step_s=0.05, gpu_name="H100", options=(("hidden", 4096),))
    ask = dict(workload=WORKLOAD, precision="fp32", batch_size=32, gpu="H100", db=db)
    wide = predict_train(**ask, workload_options=["hidden=4096"])
    assert wide.calibrated and "store run #1" in wide.calibration_source
    assert wide.step_time_s == pytest.approx(0.05, rel=0.05)  # the measured step, same batch
    assert not predict_train(**ask).calibrated  # the built-in mlp: no run of its own
    other = predict_train(**ask, workload_options=(("hidden", 1024),))
    assert not other.calibrated
    assert "no stored training measurement of mlp -o hidden=1024" in other.calibration_source
    plain = predict_train(**ask).calibration_source  # the built-in one says what is stored
    assert "the store's runs of mlp -o hidden=4096 calibrate those configurations only" in plain


def test_predict_train_request_object_and_override(tmp_path: Path) -> None:
    request = PredictTrainRequest(workload=WORKLOAD, batch_size=16, gpu="V100")
    base = predict_train(request, db=tmp_path / "s.db")
    bigger = predict_train(request, batch_size="64", db=tmp_path / "s.db")
    assert bigger.batch_size == 64 and bigger.step_time_s > base.step_time_s


def test_big_embedding_tables_say_they_are_priced_dense(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    big = gpucast.predict_train(
        workload="dlrm", gpu="A100-80GB", batch_size=1024, db=db,
        workload_options={"table_sizes": (4_000_000,) * 2, "embedding_dim": 64},
    )  # fmt: skip
    said = big.embeddings_assumption
    assert said is not None and "dense gradients" in said.value
    assert "plan embeddings" in said.override
    assert big.to_dict()["embeddings_assumption"]["name"] == "embeddings"
    small = gpucast.predict_train(workload="dlrm", gpu="A100-80GB", batch_size=1024, db=db)
    assert small.embeddings_assumption is None
    other = gpucast.predict_train(workload="mlp", gpu="A100-80GB", batch_size=64, db=db)
    assert other.embeddings_assumption is None


def test_predict_train_bad_options(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match=r"^batch-size: must be >= 1") as batch:
        predict_train(workload=WORKLOAD, batch_size=0, gpu="V100")
    assert batch.value.field == "batch-size"
    with pytest.raises(InvalidSpecError, match="must be a whole number"):
        predict_train(workload=WORKLOAD, batch_size="many", gpu="V100")
    with pytest.raises(InvalidSpecError, match="precision: must be one of fp32, bf16, fp16"):
        PredictTrainRequest(workload=WORKLOAD, batch_size=8, gpu="V100", precision="fp64")
    with pytest.raises(InvalidSpecError, match=r"^gpu: is required"):
        predict_train(workload=WORKLOAD, batch_size=8)
    with pytest.raises(UnknownGpuError, match="Voodoo5"):
        predict_train(workload=WORKLOAD, batch_size=8, gpu="Voodoo5", db=tmp_path / "s.db")


# -- predict speed --------------------------------------------------------------------------
@pytest.fixture
def speed_json(tmp_path: Path) -> Path:
    out = tmp_path / "speed.json"
    fit_speed(data=[speed_csv(tmp_path / "train.csv")], out=out)
    return out


def test_predict_speed_rows_in_rows_out(tmp_path: Path, speed_json: Path) -> None:
    rows = tmp_path / "in.csv"
    rows.write_text(
        "GPU (temp),Model FLOPs,Number of Parameters,Number of Tensors,note\n"
        "P100,2e9,2.2e6,120,keep me\nV100,2e9,2.2e6,120,\n"
    )
    out = tmp_path / "out.csv"
    result = predict_speed(model=speed_json, input=rows, output=out, precision="fp32")
    assert result.rows == 2 and result.gpus_from_catalog_only == ("V100",)
    frame = result.to_frame()
    written = pd.read_csv(out, keep_default_na=False)
    assert list(written.columns) == list(frame.columns)
    assert written["Predicted Step Time (s)"].to_numpy() == pytest.approx(
        frame["Predicted Step Time (s)"].to_numpy()
    )
    assert frame["note"].iloc[0] == "keep me"
    assert frame["Predicted Step Time (s)"].iloc[1] < frame["Predicted Step Time (s)"].iloc[0]
    assert result.to_dict() == {
        "output": str(out), "rows": 2, "gpus_from_catalog_only": ["V100"],
        "peak_sources": {"V100": "catalog specs of V100-16GB"}, "warnings": [],
    }  # fmt: skip


def test_predict_speed_says_which_peak_and_a_row_tflops_far_from_the_catalog(
    tmp_path: Path, speed_json: Path
) -> None:
    """QA session 36 #26: an unknown GPU and an H100 whose GPU TFLOPS cell was K80's got the
    same step time, both said to come "from catalog specs"."""
    rows = tmp_path / "in.csv"
    rows.write_text(
        "GPU (temp),GPU TFLOPS,Model FLOPs,Number of Parameters,Number of Tensors\n"
        "NOPE,4.113,2e9,2.2e6,120\nH100,4.113,2e9,2.2e6,120\nV100,15,2e9,2.2e6,120\n"
        "T4,,2e9,2.2e6,120\n"
    )
    result = predict_speed(model=speed_json, input=rows, output=tmp_path / "o.csv")
    assert result.peak_sources == {
        "H100": "the rows' GPU TFLOPS", "NOPE": "the rows' GPU TFLOPS",
        "T4": "catalog specs", "V100": "the rows' GPU TFLOPS",
    }  # fmt: skip
    (warning,) = result.warnings  # V100's 15 is the catalog's 15.7 near enough; NOPE has none
    assert "the H100 rows give GPU TFLOPS 4.113, the catalog's H100-SXM fp32 peak is 67" in warning
    assert warning.startswith(str(rows)) and "leave it empty" in warning


def test_predict_speed_errors_name_the_option(tmp_path: Path, speed_json: Path) -> None:
    out = tmp_path / "out.csv"
    with pytest.raises(InvalidSpecError, match="file not found") as missing:
        predict_speed(model=speed_json, input=tmp_path / "none.csv", output=out)
    assert missing.value.field == "input"
    with pytest.raises(InvalidSpecError, match="file not found") as model:
        predict_speed(model=tmp_path / "none.json", input=tmp_path / "x.csv", output=out)
    assert model.value.field == "model"
    with pytest.raises(InvalidSpecError, match="precision: must be one of"):
        predict_speed(model=speed_json, input=tmp_path / "x.csv", output=out, precision="int4")
    assert not out.exists()


# -- predict cluster ------------------------------------------------------------------------
@pytest.fixture
def cluster_json(tmp_path: Path) -> Path:
    out = tmp_path / "cluster.json"
    fit_cluster(data=cluster_folder(tmp_path), out=out)
    return out


def test_predict_cluster_looks_up_fitted_step_times(tmp_path: Path, cluster_json: Path) -> None:
    rows = tmp_path / "rows.csv"
    rows.write_text(
        "GPU (temp),Model (temp),Number of Parameters,Number of Tensors,"
        "Workers,Parameter Servers,Strategy,Step Time (s)\n"
        "P100,big,3e7,200,4,1,,\n"
        "P100,big,3e7,200,4,1,ps-async,0.5\n"
        "K80,small,1e6,100,2,1,ALLREDUCE,\n"
    )
    out = tmp_path / "out.csv"
    result = predict_cluster(model=cluster_json, input=rows, output=out)
    frame = result.to_frame()
    assert result.rows == 3 and out.is_file()
    assert sum(result.bottlenecks.values()) == 3
    assert result.to_dict() == {
        "output": str(out),
        "rows": 3,
        "bottlenecks": frame["Bottleneck"].value_counts().to_dict(),
        "warnings": list(result.warnings),
    }
    speed = frame["Predicted Speed (steps/sec)"]
    # the fitted 1-worker P100/big speed is 2 steps/s: 0.5 s/step, as the second row gives
    assert speed.iloc[0] == pytest.approx(speed.iloc[1])


def test_predict_cluster_says_when_the_shards_needed_is_the_search_cap(
    tmp_path: Path, cluster_json: Path
) -> None:
    """QA 38 P: a synchronous PS row wrote `PS Shards Needed` 64, the search's cap, as if 64
    removed the bottleneck. The column stays numeric; `PS Shards Needed Capped` says the
    count is the cap (more than 64 needed) and a warning counts such rows."""
    from gpucast.predict.cluster import MAX_SHARDS_SEARCHED

    rows = tmp_path / "rows.csv"
    rows.write_text(
        "Number of Parameters,Number of Tensors,Workers,Parameter Servers,Step Time (s),Strategy\n"
        "25557032,161,4,1,0.26,ps-sync\n"
        "25557032,161,4,1,0.26,ps-async\n"
        "25557032,161,4,0,0.26,allreduce\n"
    )
    result = predict_cluster(model=cluster_json, input=rows, output=tmp_path / "o.csv")
    frame = result.to_frame()
    assert list(frame["PS Shards Needed"]) == [MAX_SHARDS_SEARCHED, 2, 0]
    assert list(frame["PS Shards Needed Capped"]) == [True, False, False]
    (warning,) = result.warnings
    assert warning.startswith(f"1 row PS-bound even with {MAX_SHARDS_SEARCHED} shards")
    assert result.to_dict()["warnings"] == [warning]
    # here no count could help: the workers' own links outlast their compute, and it says so
    from gpucast.store.models import load_model

    est = load_model(cluster_json).predict(0.26, 4, 1, "ps-sync", param_bytes=1.02e8, n_tensors=161)
    assert est.breakdown["ps_shards_capped"] == 1.0
    assert any(n.startswith("no PS shard count removes the bottleneck") for n in est.notes)


def test_predict_cluster_unseen_model_names_line_and_column(
    tmp_path: Path, cluster_json: Path
) -> None:
    rows = tmp_path / "rows.csv"
    rows.write_text(
        "GPU (temp),Model (temp),Number of Parameters,Number of Tensors,Workers,Parameter Servers\n"
        "P100,big,3e7,200,4,1\nV100,unseen,1e6,10,2,1\n"
    )
    with pytest.raises(DataFormatError, match="V100/unseen was not in the fit data") as exc:
        predict_cluster(model=cluster_json, input=rows, output=tmp_path / "o.csv")
    assert exc.value.line == 3 and exc.value.column == "Step Time (s)"
    assert not (tmp_path / "o.csv").exists()


def test_wrong_model_kind_names_model(tmp_path: Path, cluster_json: Path) -> None:
    rows = tmp_path / "rows.csv"
    rows.write_text("Checkpoint Size (MB)\n100\n")
    with pytest.raises(InvalidSpecError, match="holds a 'cluster' model") as exc:
        predict_checkpoint(model=cluster_json, input=rows, output=tmp_path / "o.csv")
    assert exc.value.field == "model" and "gpucast fit checkpoint" in str(exc.value)


# -- predict checkpoint ---------------------------------------------------------------------
def test_predict_checkpoint(tmp_path: Path) -> None:
    model = tmp_path / "ckpt.json"
    fit_checkpoint(data=checkpoint_csv(tmp_path / "c.csv"), out=model)
    rows = tmp_path / "rows.csv"
    rows.write_text("Checkpoint Size (MB),Index File Size\n100,25\n50,\n")
    out = tmp_path / "out.csv"
    result = predict_checkpoint(PredictCheckpointRequest(model=model, input=rows, output=out))
    summary = result.to_dict()
    assert (summary["output"], summary["rows"]) == (str(out), 2)
    frame = result.to_frame()
    assert [p["duration_s"] for p in summary["predictions"]] == pytest.approx(
        frame["Predicted Duration (s)"].tolist()
    )
    assert frame["Predicted Duration (s)"].iloc[0] == pytest.approx(5.0, rel=0.02)
    assert (frame["Lower (s)"] <= frame["Predicted Duration (s)"]).all()
    rows.write_text("Checkpoint Size (MB)\n100\n-5\n")
    out.unlink()
    with pytest.raises(DataFormatError, match="must be >= 0") as bad:
        predict_checkpoint(model=model, input=rows, output=out)
    assert bad.value.line == 3 and bad.value.column == "Checkpoint Size (MB)"
    assert not out.exists()


def test_predict_checkpoint_prints_without_an_output_file(tmp_path: Path) -> None:
    """QA 35 E #20: `predict checkpoint --json` said "output: is required" (the help did not
    mark it; --json cannot print without it); a bad cell named no fix."""
    model = tmp_path / "ckpt.json"
    fit_checkpoint(data=checkpoint_csv(tmp_path / "c.csv"), out=model)
    rows = tmp_path / "rows.csv"
    rows.write_text("Checkpoint Size (MB)\n100\n")
    result = predict_checkpoint(model=model, input=rows)
    summary = result.to_dict()
    assert summary["output"] is None and summary["rows"] == 1
    (one,) = summary["predictions"]
    assert one["duration_s"] == pytest.approx(5.0, rel=0.02)
    assert one["lower_s"] <= one["duration_s"] <= one["upper_s"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.csv", "ckpt.json", "rows.csv"]
    rows.write_text("Checkpoint Size (MB)\n-100\n")
    with pytest.raises(DataFormatError) as bad:
        predict_checkpoint(model=model, input=rows)
    assert bad.value.fix == "correct the cell to a number >= 0, or drop the row"


def test_precision_is_stated_and_auto_picks_what_practitioners_use() -> None:
    """#21, QA #10: the default is auto, as in plan train and simulate train: bf16 on an A100,
    fp32 on a V100 (no bf16 tensor cores), and the result says auto chose it by default; a
    given fp32 says bf16 is what a practitioner would use on an A100."""
    on_a100 = gpucast.predict_train(workload="mlp", batch_size=8, gpu="A100")
    on_v100 = gpucast.predict_train(workload="mlp", batch_size=8, gpu="V100", precision="auto")
    assert on_a100.precision == "bf16" and on_v100.precision == "fp32"
    assert on_a100.precision_text == "bf16 by auto, the --precision default"
    assert on_a100.to_dict()["precision_requested"] == "auto"
    explicit = gpucast.predict_train(workload="mlp", batch_size=8, gpu="A100", precision="bf16")
    assert on_a100.step_time_s == explicit.step_time_s and explicit.precision_text == "bf16"
    assert on_a100.precision_assumption is not None
    assert on_a100.precision_assumption.source == "--precision auto (the default)"
    fp32 = gpucast.predict_train(workload="mlp", batch_size=8, gpu="A100", precision="fp32")
    said = fp32.precision_assumption
    assert said is not None and fp32.precision == "fp32"
    assert "bf16" in said.value and said.source == "given"


def test_fp32_on_an_a100_runs_convolutions_on_tf32_and_tf32_can_be_asked_for() -> None:
    """PyTorch's fp32 on an A100 puts convolutions on TF32 (cuDNN's default) and says so;
    ``tf32`` is accepted (profiled at fp32); a V100 has no TF32 units and says what it
    priced; ``tf16`` is one line naming the choices."""
    fp32 = gpucast.predict_train(workload="resnet18", batch_size=32, gpu="A100", precision="fp32")
    tf32 = gpucast.predict_train(workload="resnet18", batch_size=32, gpu="A100", precision="tf32")
    v100 = gpucast.predict_train(workload="resnet18", batch_size=32, gpu="V100", precision="tf32")
    assert any("convolutions on its TF32 tensor cores" in n for n in fp32.estimate.notes)
    assert tf32.precision == "tf32" and tf32.step_time_s <= fp32.step_time_s
    # QA 39: on a GPU without TF32 units tf32 is fp32, as plan train resolves it -- it was
    # labelled, calibrated and validated as "tf32" on the V100 ("not validated for V100, tf32")
    v100_fp32 = gpucast.predict_train(workload="resnet18", batch_size=32, gpu="V100")
    assert (v100.precision, v100.precision_requested) == ("fp32", "tf32")
    assert v100.step_time_s == v100_fp32.step_time_s
    assert v100.validation.error == v100_fp32.validation.error
    said = v100.precision_assumption
    assert said is not None and said.value.startswith("fp32: the V100-16GB has no TF32 units")
    with pytest.raises(InvalidSpecError, match="fp32, bf16, fp16, tf32, fp8, auto"):
        gpucast.predict_train(workload="resnet18", batch_size=32, gpu="A100", precision="tf16")


def test_the_measurement_nearest_the_batch_calibrates_and_narrows_the_band(
    tmp_path: Path,
) -> None:
    db = tmp_path / "store.db"
    store_measurement(db, batch=8, step_s=0.004, gpu_name="A100-40GB")
    store_measurement(db, batch=64, step_s=0.020, gpu_name="A100-40GB")  # newer, 8x the batch
    near_small = predict_train(workload=WORKLOAD, precision="fp32", batch_size=8, gpu="H100", db=db)
    near_large = predict_train(
        workload=WORKLOAD, precision="fp32", batch_size=48, gpu="H100", db=db
    )
    assert "store run #1" in near_small.calibration_source  # batch 8, though older
    assert "store run #2" in near_large.calibration_source
    # each within 2x of the measurement it is calibrated by: the same band
    assert near_small.estimate.upper / near_small.estimate.value == pytest.approx(
        near_large.estimate.upper / near_large.estimate.value
    )


def test_a_cpu_measurement_calibrates_no_gpu_prediction_at_any_precision(
    tmp_path: Path,
) -> None:
    """A CPU run (gpucast measure train --device cpu) cannot tell a GPU's per-kernel costs:
    every precision's prediction stays the fitted model's, with its uncalibrated band, and
    says which run it left out, on which device; a GPU run newer or not still calibrates."""
    db = tmp_path / "store.db"
    store_measurement(db, batch=64, step_s=0.0079)  # on the CPU, fp32
    for precision in ("fp32", "bf16"):
        bare = predict_train(
            workload=WORKLOAD, batch_size=64, gpu="H100", precision=precision,
            db=tmp_path / "empty.db",
        )  # fmt: skip
        after = predict_train(
            workload=WORKLOAD, batch_size=64, gpu="H100", precision=precision, db=db
        )
        assert not after.calibrated
        est, was = after.estimate, bare.estimate
        assert (est.value, est.lower, est.upper) == (was.value, was.lower, was.upper)
        assert est.notes == was.notes  # the same regime and band
        source = after.calibration_source
        assert source.startswith(f"none: no stored training measurement of {WORKLOAD} at ")
        assert "store run #1 (cpu, batch 64, fp32, 7.9 ms/step) calibrates no GPU" in source
        assert "at any precision" in source and "uncalibrated regime" in source
    store_measurement(db, batch=32, step_s=0.003, gpu_name="A100-40GB")
    gpu = predict_train(workload=WORKLOAD, precision="fp32", batch_size=64, gpu="H100", db=db)
    assert gpu.calibrated and "store run #2 (cuda, batch 32" in gpu.calibration_source


def test_a_gpu_run_at_another_precision_is_named_with_what_it_calibrates(tmp_path: Path) -> None:
    """A measurement on a GPU at fp32 (``measure train``'s default) calibrates fp32 predictions;
    a bf16 one (``predict train``'s auto on an H100) says which run it left and how to use it."""
    db = tmp_path / "store.db"
    store_measurement(db, batch=32, step_s=0.003, gpu_name="A100-40GB")  # fp32
    bf16 = predict_train(workload=WORKLOAD, batch_size=64, gpu="H100", db=db)  # auto: bf16
    assert bf16.precision == "bf16" and not bf16.calibrated
    source = bf16.calibration_source
    assert "store run #1 (A100-40GB, batch 32) ran fp32: it calibrates --precision fp32" in source
    assert f"gpucast measure train {WORKLOAD} --precision bf16" in source
    fp32 = predict_train(workload=WORKLOAD, batch_size=64, gpu="H100", precision="fp32", db=db)
    assert fp32.calibrated


def test_a_step_that_fits_no_memory_is_refused_naming_predict_trains_options() -> None:
    with pytest.raises(InvalidSpecError) as refused:
        gpucast.predict_train(workload="resnet50", batch_size=100_000, gpu="H100")
    err = refused.value
    assert err.field == "batch-size" and "does not fit in H100-SXM memory" in err.message
    assert "no strategy fits 1 x H100-SXM" in err.message and "GiB per GPU" in err.message
    fix = err.fix or ""
    assert "--batch-size" in fix and "--gpu" in fix and "plan train" in fix
    assert "--workers" not in str(err)  # predict train has no --workers
    most = int(fix.split("--batch-size ")[1].split()[0])
    fits = gpucast.predict_train(workload="resnet50", batch_size=most, gpu="H100")
    assert fits.memory is not None and fits.memory["plan"] is not None
    with pytest.raises(InvalidSpecError, match="does not fit"):
        gpucast.predict_train(workload="resnet50", batch_size=most + 1, gpu="H100")


def test_a_measurement_on_the_gpu_states_the_band_of_the_batch_distance(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    store_measurement(db, batch=64, step_s=0.01, gpu_name="A100-40GB")
    near = predict_train(workload=WORKLOAD, precision="fp32", batch_size=64, gpu="A100-40GB", db=db)
    far = predict_train(
        workload=WORKLOAD, precision="fp32", batch_size=2048, gpu="A100-40GB", db=db
    )
    assert near.step_time_s == pytest.approx(0.01)
    width = [r.estimate.upper / r.estimate.lower for r in (near, far)]
    assert width[0] < width[1]
    notes = " ".join(near.estimate.notes)
    assert "same_gpu/calibrated/batch_x2" in notes and "at batch 64" in notes
    assert "batch_far" in " ".join(far.estimate.notes)
    # another GPU type, calibrated from it: its regime's split by the same distance
    other = predict_train(workload=WORKLOAD, precision="fp32", batch_size=64, gpu="H100-SXM", db=db)
    assert "gpu_" in " ".join(other.estimate.notes) and "calibrated/batch_x2" in " ".join(
        other.estimate.notes
    )


def test_measurements_at_several_batches_each_calibrate_their_neighbourhood(
    tmp_path: Path,
) -> None:
    db = tmp_path / "store.db"
    store_measurement(db, batch=16, step_s=0.9, gpu_name="H100-SXM")  # another device: not one
    store_measurement(db, batch=8, step_s=0.004, gpu_name="A100-40GB")
    store_measurement(db, batch=256, step_s=0.050, gpu_name="A100-40GB")
    small = predict_train(workload=WORKLOAD, precision="fp32", batch_size=8, gpu="A100-40GB", db=db)
    large = predict_train(
        workload=WORKLOAD, precision="fp32", batch_size=256, gpu="A100-40GB", db=db
    )
    assert small.step_time_s == pytest.approx(0.004)
    assert large.step_time_s == pytest.approx(0.050)
    # the planner's table: each batch from the measurement nearest it, as predict train
    planned, _ = _planner_step_s(8, "A100-40GB", "fp32", db)
    assert planned == pytest.approx(0.004)
    planned, _ = _planner_step_s(200, "A100-40GB", "fp32", db)
    assert planned == pytest.approx(
        predict_train(
            workload=WORKLOAD, precision="fp32", batch_size=200, gpu="A100-40GB", db=db
        ).step_time_s
    )


def test_two_stored_measurements_on_the_gpu_price_the_batches_between(tmp_path: Path) -> None:
    def truth(batch: int) -> float:  # per-sample part 1.5x the roofline's, fixed part 3x
        parts = predict_train(
            workload=WORKLOAD, batch_size=batch, gpu="A100-40GB", precision="fp32",
            db=tmp_path / "none.db",
        ).estimate.breakdown  # fmt: skip
        return 1.5 * (parts["compute"] + parts["memory_bandwidth"]) + 3.0 * parts["overhead"]

    db = tmp_path / "store.db"
    store_measurement(db, batch=8, step_s=truth(8), gpu_name="A100-40GB")
    store_measurement(db, batch=256, step_s=truth(256), gpu_name="A100-40GB")
    mid = predict_train(workload=WORKLOAD, precision="fp32", batch_size=64, gpu="A100-40GB", db=db)
    notes = " ".join(mid.estimate.notes)
    assert "two measurements on A100-40GB, at batches 8 and 256" in notes
    assert "same_gpu/calibrated/bracketed" in notes and "between two measured ones" in notes
    assert mid.step_time_s == pytest.approx(truth(64))
    planned, _ = _planner_step_s(64, "A100-40GB", "fp32", db)
    assert planned == pytest.approx(mid.step_time_s)


def test_each_measured_gpu_type_calibrates_from_its_own_measurements(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    store_measurement(db, batch=64, step_s=0.010, gpu_name="A100-40GB")
    store_measurement(db, batch=64, step_s=0.004, gpu_name="H100-SXM")  # the newest
    a100 = predict_train(workload=WORKLOAD, precision="fp32", batch_size=64, gpu="A100-40GB", db=db)
    assert a100.step_time_s == pytest.approx(0.010)  # its own, though H100's is newer
    assert "store run #1" in a100.calibration_source
    plan = gpucast.plan_train(
        workload=WORKLOAD, epochs=1, dataset_size=64_000, deadline="100h",
        gpus=("A100-40GB", "H100-SXM"), batch_size=64, max_gpus=8, precision="fp32", db=db,
    )  # fmt: skip
    fastest = {
        g: min(c.step_time_s for c in plan.candidates if c.gpu == g)
        for g in ("A100-40GB", "H100-SXM")
    }
    # each type's step at the measured batch is its own measurement (plus any all-reduce,
    # variability and power); calibrated from H100's, the A100 would be priced ~2x faster
    assert fastest["A100-40GB"] == pytest.approx(0.010, rel=0.05)
    assert fastest["H100-SXM"] == pytest.approx(0.004, rel=0.05)
    calibration = plan.assumption("step-time calibration")
    assert calibration is not None and "A100-40GB: its own, store run #1" in calibration.source


def test_simulate_train_calibrates_each_gpu_type_from_its_own_measurements(
    tmp_path: Path,
) -> None:
    import json

    db = tmp_path / "store.db"
    store_measurement(db, batch=64, step_s=0.010, gpu_name="A100-40GB")
    store_measurement(db, batch=64, step_s=0.004, gpu_name="H100-SXM")  # the newest
    result = gpucast.simulate_train(
        instance="a2-highgpu-1g", workers=1, region="us-central1", provider="gcp",
        strategy="allreduce", workload=WORKLOAD, batch_size=64, steps=1000, runs=50, seed=1,
        precision="fp32", db=db,
    )  # fmt: skip
    said = json.dumps(result.to_dict())
    assert "calibrated by store run #1" in said and "store run #2" not in said
    assert "10.0 ms at batch 64 on A100-40GB" in said


def test_simulate_train_states_that_a_cpu_run_calibrates_no_gpu(tmp_path: Path) -> None:
    kw = {
        "instance": "a2-highgpu-1g", "workers": 1, "region": "us-central1", "provider": "gcp",
        "strategy": "allreduce", "workload": WORKLOAD, "batch_size": 64, "steps": 1000,
        "runs": 50, "seed": 1, "precision": "bf16",
    }  # fmt: skip
    bare = gpucast.simulate_train(**kw, db=tmp_path / "empty.db")
    db = tmp_path / "store.db"
    store_measurement(db, batch=64, step_s=0.0079)  # on the CPU, at fp32
    result = gpucast.simulate_train(**kw, db=db)
    assert result.transient.summary() == bare.transient.summary()  # the same step time
    speed = result.sources["speed"]
    assert "calibration: none: no stored training measurement of mlp at bf16 on a GPU" in speed
    assert "store run #1 (cpu, batch 64, fp32, 7.9 ms/step) calibrates no GPU" in speed


V100_PCIE = "Tesla V100-PCIE-32GB"  # as NVML names it: the catalog's V100-PCIe, 100-250 W


def test_a_run_at_the_default_power_limit_beats_a_newer_throttled_one(tmp_path: Path) -> None:
    """After `measure train --power-limits 250,150` the newest run at the batch is the
    throttled one; the step at the default limit is the 250 W run's."""
    db = tmp_path / "store.db"
    store_measurement(db, 64, 0.011, V100_PCIE, power_limit_w=250.0, power_w=200.0)
    store_measurement(db, 64, 0.016, V100_PCIE, power_limit_w=150.0, power_w=148.0)
    r = predict_train(workload=WORKLOAD, batch_size=64, gpu="V100-PCIe", db=db)
    assert r.step_time_s == pytest.approx(0.011)
    assert "store run #1" in r.calibration_source and "#2" not in r.calibration_source
    planned, _ = _planner_step_s(64, "V100-PCIe", "fp32", db)
    assert planned == pytest.approx(0.011)


def test_a_run_under_a_reduced_power_limit_is_converted_to_the_default_limit(
    tmp_path: Path,
) -> None:
    db = tmp_path / "store.db"
    store_measurement(
        db, 64, 0.15, V100_PCIE, workload="resnet18", power_limit_w=150.0, power_w=148.0
    )
    r = predict_train(workload="resnet18", batch_size=64, gpu="V100-PCIe", db=db)
    assert 0.5 * 0.15 < r.step_time_s < 0.95 * 0.15  # faster at the default 250 W
    source = r.calibration_source
    assert "store run #1" in source and "under a 150 W power limit" in source
    assert "below the default 250 W" in source and "power model's slowdown" in source
    # the power model's own sweep from the run's limit puts the default step there
    energy = gpucast.predict_energy(
        workload="resnet18", batch_size=64, gpu="V100-PCIe", power_limit=150.0, db=db
    )
    (default,) = [p for p in energy.sweep if p.power_limit_w == 250.0]
    assert default.step_time_s == pytest.approx(r.step_time_s, rel=1e-6)
    # a run at another batch is converted as well when it calibrates the neighbourhood
    store_measurement(
        db, 8, 0.03, V100_PCIE, workload="resnet18", power_limit_w=150.0, power_w=140.0
    )
    both = predict_train(workload="resnet18", batch_size=64, gpu="V100-PCIe", db=db)
    assert "#2 converted to the default power limit likewise" in both.calibration_source


def test_a_run_without_a_recorded_limit_or_at_the_default_is_not_converted(
    tmp_path: Path,
) -> None:
    db = tmp_path / "store.db"
    store_measurement(db, 64, 0.15, V100_PCIE, workload="resnet18")
    r = predict_train(workload="resnet18", batch_size=64, gpu="V100-PCIe", db=db)
    assert r.step_time_s == pytest.approx(0.15) and "power" not in r.calibration_source
    store_measurement(
        db, 64, 0.12, V100_PCIE, workload="resnet18", power_limit_w=249.0, power_w=200.0
    )  # the default as NVML reports it, within a watt or two
    r = predict_train(workload="resnet18", batch_size=64, gpu="V100-PCIe", db=db)
    assert r.step_time_s == pytest.approx(0.12) and "power" not in r.calibration_source


def test_predict_infer_states_the_link_its_all_reduce_is_priced_on() -> None:
    # a default that changes the result is shown: MI300X's pairwise mesh (2 of 8 reach one
    # peer's links, 1/7), PCIe cards bridged in pairs (4 cross PCIe), an NVSwitch datasheet link
    common = {"model": "llama-3-8b", "batch_size": 8, "input_len": 512, "output_len": 128}
    mesh = gpucast.predict_infer(**common, gpu="MI300X", tp=2).assumptions["intra-node links"]
    assert mesh.startswith("128 GB/s per GPU") and "1/7 of its links" in mesh
    bridged = gpucast.predict_infer(**common, gpu="H100-PCIe", tp=4)
    assert "a group beyond a pair" in bridged.assumptions["intra-node links"]
    switch = gpucast.predict_infer(**common, gpu="H100", tp=2).assumptions["intra-node links"]
    assert switch.startswith("900 GB/s per GPU")
    assert "intra-node links" not in gpucast.predict_infer(**common, gpu="H100", tp=1).assumptions


def test_plan_serve_states_its_picks_tensor_parallel_link() -> None:
    # Llama-3-70B needs tp >= 2 on 80 GB H100s: the pick's all-reduce link is named
    plan = gpucast.plan_serve(
        model="llama-3-70b", rate=1, slo_ttft_ms=3000, slo_tpot_ms=150, gpus=("H100",),
        duration_s=60,
    )  # fmt: skip
    assert plan.plan.best is not None and plan.plan.best.tp > 1
    assert "the pick's: 900 GB/s per GPU" in plan.assumptions["tensor parallelism"]


def test_predict_cluster_all_reduce_rows_take_a_bare_step_and_no_servers(
    tmp_path: Path, cluster_json: Path
) -> None:
    """QA session 38: an all-reduce row needed Parameter Servers >= 1 and its step was read as
    1 worker + 1 PS, the PS time taken out: ResNet-50's 0.26 s step on 1 all-reduce worker
    came out at 50 steps/s (13x a lone GPU's 3.85), 4 workers at 30.9."""
    rows = tmp_path / "rows.csv"
    rows.write_text(
        "Number of Parameters,Number of Tensors,Workers,Parameter Servers,Step Time (s),Strategy\n"
        "25557032,161,1,0,0.26,allreduce\n"
        "25557032,161,4,0,0.26,allreduce\n"
        "25557032,161,4,0,0.26,fsdp\n"
        "25557032,161,4,1,0.26,allreduce\n"
    )
    frame = predict_cluster(model=cluster_json, input=rows, output=tmp_path / "o.csv").to_frame()
    speed = frame["Predicted Speed (steps/sec)"]
    assert speed.iloc[0] == pytest.approx(1 / 0.26, rel=0.02)  # one GPU: its own step
    assert speed.iloc[1] <= 4 / 0.26 * 1.001 and speed.iloc[2] <= 4 / 0.26 * 1.001
    assert speed.iloc[3] == pytest.approx(speed.iloc[1])  # a PS count is ignored, not priced
    assert (frame["PS Shards Needed"] == 0).all()
    rows.write_text(
        "Number of Parameters,Number of Tensors,Workers,Parameter Servers,Step Time (s),Strategy\n"
        "25557032,161,4,0,0.26,ps-async\n"
    )
    with pytest.raises(DataFormatError, match="must be >= 1 for strategy ps-async") as exc:
        predict_cluster(model=cluster_json, input=rows, output=tmp_path / "o2.csv")
    assert exc.value.line == 2 and exc.value.column == "Parameter Servers"
