"""The roofline step time, uncalibrated, against the Zeus power traces (out of sample).

Data: ``../shared/data/zeus_nsdi23/summary_power_{v100,p100}.csv`` -- one epoch of ResNet-50
on ImageNet (1,281,167 images) per batch size on one GPU; the highest power limit stands for
the unthrottled GPU (the issue's rule). Throughput measured = images / time per epoch (fp32
PyTorch; the data pipeline is part of what Zeus timed). Predicted = batch / the roofline
step of the profiled ``resnet50`` at fp32 on the catalog GPU (``gpucast predict train``'s and
``plan train``'s number), with nothing calibrated: the FP32 efficiency prior comes from the
CM-DARE K80/P100 TensorFlow fit, never from Zeus. The RTX 6000 rows are skipped (not in the
catalog). Prints the error per GPU and batch, MAPE per GPU, and whether the stated interval
covers the measurement. Run: ``python benchmarks/roofline_zeus.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from gpucast.catalog import load_catalog
from gpucast.inputs.workload import workload_facts, workload_profile
from gpucast.predict.roofline import predict_step_time

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "zeus_nsdi23"
IMAGENET_TRAIN_IMAGES = 1_281_167
GPUS = {"v100": "V100-16GB", "p100": "P100"}  # Zeus file -> catalog GPU (same compute)


def main() -> int:
    if not DATA.is_dir():
        print(f"published data not found at {DATA.resolve()}; nothing to compare")
        return 0
    catalog = load_catalog()
    facts = workload_facts(workload_profile("resnet50", "fp32"))
    rows = []
    for key, name in GPUS.items():
        trace = pd.read_csv(DATA / f"summary_power_{key}.csv")
        top = trace[(trace.dataset == "imagenet") & (trace.power_limit == trace.power_limit.max())]
        spec = catalog.gpu(name)
        for r in top.itertuples():
            batch = int(r.batch_size)
            est = predict_step_time(facts.roofline_workload(batch), spec, "fp32")
            measured = IMAGENET_TRAIN_IMAGES / float(r.time_per_epoch)
            rows.append(
                {
                    "gpu": name,
                    "batch": batch,
                    "measured_img_s": measured,
                    "predicted_img_s": batch / est.value,
                    "lower_img_s": batch / est.upper,
                    "upper_img_s": batch / est.lower,
                }
            )
    table = pd.DataFrame(rows).sort_values(["gpu", "batch"])
    table["error_pct"] = 100 * (table.predicted_img_s / table.measured_img_s - 1)
    table["covered"] = (table.lower_img_s <= table.measured_img_s) & (
        table.measured_img_s <= table.upper_img_s
    )
    print("ResNet-50 fp32 training, 1 GPU, Zeus (highest power limit) vs uncalibrated roofline")
    print(table.round(1).to_string(index=False))
    print()
    for gpu, part in table.groupby("gpu"):
        mape = float(np.mean(np.abs(part.error_pct)))
        print(
            f"{gpu}: MAPE {mape:.1f}% over {len(part)} batch sizes, signed median "
            f"{part.error_pct.median():+.1f}%, interval covers {part.covered.mean():.0%}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
