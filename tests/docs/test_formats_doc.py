"""docs/formats.md documents every file a command reads (#21)."""

from __future__ import annotations

import importlib
from pathlib import Path

from gpucast.domain.options import fields_of

DOC = Path(__file__).resolve().parents[2] / "docs" / "formats.md"
#: Request classes of every verb that reads a user's file.
REQUESTS = (
    "gpucast.domain.plan:TrainRequest",
    "gpucast.app.simulation:SimulateTrainRequest",
    "gpucast.app.serve:SimulateServeRequest",
    "gpucast.app.serve:PlanServeRequest",
    "gpucast.app.catalog:CatalogOffersRequest",
    "gpucast.app.catalog:ImportSkypilotRequest",
    "gpucast.app.fit:FitSpeedRequest",
    "gpucast.app.fit:FitClusterRequest",
    "gpucast.app.fit:FitCheckpointRequest",
    "gpucast.app.predict:PredictSpeedRequest",
    "gpucast.app.predict:PredictClusterRequest",
    "gpucast.app.predict:PredictCheckpointRequest",
    "gpucast.app.reports:ReportRequest",
    "gpucast.app.campaign:CampaignRunRequest",
    "gpucast.app.embeddings:PlanEmbeddingsRequest",
)
#: Paths that are folders of published data (documented in ../shared/data/README.md) or
#: outputs, not files a user writes.
NOT_FORMATS = {"data-dir", "out", "output", "file", "sweep-file"}


def test_every_input_file_option_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    missing = []
    for spec in REQUESTS:
        module, _, name = spec.partition(":")
        cls = getattr(importlib.import_module(module), name)
        for f in fields_of(cls):
            if f.kind == "path" and f.flag not in NOT_FORMATS and f"--{f.flag}" not in text:
                missing.append(f"{cls.__name__}: --{f.flag}")
    assert not missing, missing
    for heading in (
        "campaign run",
        "import-skypilot",
        "fit lifetimes",
        "--config",
        "trace:",
        "runs import",
    ):
        assert heading in text


def test_the_sweep_settings_row_lists_every_key_with_its_default() -> None:
    # QA: the row sent users to `campaign run --help`, which lists no settings
    from gpucast.domain.campaign import MeasureSettings

    row = next(
        line
        for line in DOC.read_text(encoding="utf-8").splitlines()
        if line.startswith("| `settings`")
    )
    assert "--help" not in row
    for key, value in MeasureSettings().to_dict().items():
        if value is None:
            assert f"`{key}`: 1 per process on a CUDA device, 0 on the CPU" in row
        else:
            shown = value if isinstance(value, str) else format(value, "g")
            assert f"`{key}: {shown}`" in row, key
