"""A run stored under options at their built-in values (``mlp -o hidden=1024,1024``: a store
written before session 38 stored it so, as can ``Store.save_measurement``) is that built-in
configuration: it calibrates predictions of ``mlp`` and of the same options in any spelling,
and no other configuration (QA 38 M F4: it calibrated nothing, an orphan)."""

from __future__ import annotations

from pathlib import Path

from test_app_predict import store_measurement

from gpucast.app.predict import predict_train


def _predict(db: Path, *options: str) -> tuple[bool, str]:
    result = predict_train(
        workload="mlp", precision="fp32", batch_size=32, gpu="T4", db=db,
        workload_options=list(options),
    )  # fmt: skip
    return result.calibrated, result.calibration_source


def test_a_run_stored_at_built_in_options_calibrates_the_built_in(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store_measurement(
        db, batch=32, step_s=0.02, gpu_name="Tesla T4", workload="mlp",
        options=(("hidden", (1024, 1024)),),
    )  # fmt: skip
    for options in ((), ("hidden=1024,1024",), ("hidden=1024,1024", "num_classes=10")):
        calibrated, source = _predict(db, *options)
        assert calibrated and source.startswith("store run #1 "), (options, source)
    calibrated, source = _predict(db, "hidden=64")
    assert not calibrated and "store run #1" not in source


def test_the_uncalibrated_line_gives_no_stale_advice(tmp_path: Path) -> None:
    """`predict train mlp` with only `mlp -o hidden=64` stored told the user that "an option
    given at its built-in value makes a configuration too: measure without it" -- false since
    session 38 (such an option is stored as the plain name)."""
    db = tmp_path / "s.db"
    store_measurement(
        db, batch=32, step_s=0.02, gpu_name="Tesla T4", workload="mlp", options=(("hidden", 64),)
    )
    calibrated, source = _predict(db)
    assert not calibrated
    assert "mlp -o hidden=64 calibrate" in source and "makes a configuration" not in source


def test_a_configured_prediction_names_its_configuration(tmp_path: Path) -> None:
    """QA 38 M F6: `predict train mlp -o hidden=256` said `mlp (batch 32, ...)` and `--json`
    `"workload": "mlp"`: which configuration was predicted was nowhere but in the calibration
    text. It is named as a run of it is stored; options at built-in values name the plain one."""
    for options, name in (
        (["hidden=256"], "mlp -o hidden=256"),
        (["hidden=1024,1024"], "mlp"),
        ([], "mlp"),
    ):
        result = predict_train(
            workload="mlp", precision="fp32", batch_size=32, gpu="T4", db=tmp_path / "s.db",
            workload_options=options,
        )  # fmt: skip
        assert result.workload == name and result.to_dict()["workload"] == name
