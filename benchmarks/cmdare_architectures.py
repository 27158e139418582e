"""CM-DARE's 14 CIFAR models rebuilt from our workloads, and their profiler features.

Section 7 of ``speed_accuracy.py``: what the single-GPU step-time model gains from the features
a gpucast user gets for their own model from ``gpucast profile`` (kernel calls and bytes moved by
memory-bound operators per step), tested with the same leave-one-model-out folds.

Architectures (batch 128, FP32, SGD), checked against the data's ``Number of Parameters``:

* ``Res15``: T2T ``resnet_cifar_15`` = ``CifarResNet`` blocks [2,2,2], filters 32/64/128 with
  projection shortcuts (692,122 parameters against 693,818; 50 tensors, equal).
* ``customN``: the same ResNet with more blocks per stage. With 6 tensors per basic block and 14
  outside them, ``Number of Tensors`` gives the block count, and the parameter count then has
  exactly one solution in blocks per stage (each matches the data to the parameter, up to
  Res15's 1,696 offset): custom1 [2,3,3], custom2 [2,5,3], custom9 [6,6,6], custom4 [7,7,7],
  custom5 [8,9,9], custom6 [10,13,12], custom8 [16,20,16].
* Shake-Shake 2x{w}d, 4 blocks per stage (26 layers): shake16 w=16, shakesmall 32, shakemid 64,
  shake80 80, shakebig 96; ``shake small 32d`` w=32 with 5 blocks per stage (32 layers).
  Parameters within 0.3% of the data's. T2T's Shake-Shake has more variables (210-264) than
  ours (157-197), so its ``Number of Tensors`` is kept from the data where a form uses it.

    .venv/bin/python benchmarks/cmdare_architectures.py   # prints the feature table
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import torch
from scipy.optimize import nnls

from gpucast.domain.workload import WorkloadSpec
from gpucast.predict.validation import error_summary, leave_one_group_out
from gpucast.profile.profiler import profile
from gpucast.workloads.base import Workload
from gpucast.workloads.vision import (
    CifarResNet,
    ShakeShake,
    _classification_loss,
    _image_batch_maker,
)

#: CM-DARE model name -> ("resnet", blocks per stage) or ("shake", (width, blocks per stage)).
ARCHITECTURES: dict[str, tuple[str, tuple[int, ...]]] = {
    "Res15": ("resnet", (2, 2, 2)),
    "custom1": ("resnet", (2, 3, 3)),
    "custom2": ("resnet", (2, 5, 3)),
    "custom9": ("resnet", (6, 6, 6)),
    "custom4": ("resnet", (7, 7, 7)),
    "custom5": ("resnet", (8, 9, 9)),
    "custom6": ("resnet", (10, 13, 12)),
    "custom8": ("resnet", (16, 20, 16)),
    "shake16": ("shake", (16, 4)),
    "shakesmall": ("shake", (32, 4)),
    "shake small 32d": ("shake", (32, 5)),
    "shakemid": ("shake", (64, 4)),
    "shake80": ("shake", (80, 4)),
    "shakebig": ("shake", (96, 4)),
}
BATCH_SIZE = 128


def _workload(name: str) -> Workload:
    kind, arch = ARCHITECTURES[name]

    def build(device: torch.device) -> torch.nn.Module:
        with torch.device(device):
            if kind == "resnet":
                blocks = (arch[0], arch[1], arch[2])
                return CifarResNet(blocks, 16, (32, 64, 128), "B", 10)
            return ShakeShake(arch[0], arch[1], 10)

    return Workload(
        name=name,
        family="vision",
        sample_unit="images",
        build_model=build,
        make_batch=_image_batch_maker(3, 32, 10),
        loss=_classification_loss,
    )


def feature_table() -> pd.DataFrame:
    """Profiler features per CM-DARE model, one training step at batch 128 (about 10 s)."""
    records = []
    for name in ARCHITECTURES:
        p = profile(_workload(name), WorkloadSpec(name=name, batch_size=BATCH_SIZE))
        by_class = {c.op_class: c for c in p.train_step_by_class()}
        records.append(
            {
                "model": name,
                "params": p.parameters_total,
                "tensors": p.parameter_tensors,
                "train_flops": p.forward_backward_flops,
                "kernel_calls": sum(c.calls for c in by_class.values()),
                "memory_bound_bytes": sum(
                    c.bytes_moved for k, c in by_class.items() if k != "matmul_conv"
                ),
                "matmul_conv_bytes": by_class["matmul_conv"].bytes_moved,
            }
        )
    return pd.DataFrame(records).set_index("model")


#: Forms compared (per GPU, NNLS on relative error, like SpeedModel). Names: data columns
#: T (Number of Tensors), F (Model FLOPs); profiler columns calls, flops, mem (memory-bound bytes).
FORMS: dict[str, tuple[str, ...]] = {
    "fixed + T + F (SpeedModel)": ("1", "T", "F"),
    "fixed + calls + flops": ("1", "calls", "flops"),
    "fixed + calls + flops + mem": ("1", "calls", "flops", "mem"),
    "fixed + T + F + mem": ("1", "T", "F", "mem"),
    "fixed + T + calls + F + mem": ("1", "T", "calls", "F", "mem"),
    "fixed + calls + mem (no FLOPs)": ("1", "calls", "mem"),
}


def _columns(rows: pd.DataFrame, features: pd.DataFrame) -> dict[str, np.ndarray]:
    model = rows["Model (temp)"].astype(str)
    cols = {
        "1": np.ones(len(rows)),
        "T": rows["Number of Tensors"].to_numpy(dtype=np.float64),
        "F": rows["Model FLOPs"].to_numpy(dtype=np.float64),
        "calls": model.map(features["kernel_calls"]).to_numpy(dtype=np.float64),
        "flops": model.map(features["train_flops"]).to_numpy(dtype=np.float64),
        "mem": model.map(features["memory_bound_bytes"]).to_numpy(dtype=np.float64),
    }
    return cols


def _fit_predict(
    features: pd.DataFrame, form: tuple[str, ...]
) -> Callable[[pd.DataFrame, pd.DataFrame], np.ndarray]:
    def fit_predict(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
        xtr, xte = _columns(train, features), _columns(test, features)
        y = train["Step Time (s)"].to_numpy(dtype=np.float64)
        gpu_tr, gpu_te = train["GPU (temp)"].to_numpy(), test["GPU (temp)"].to_numpy()
        out = np.full(len(test), np.nan)
        for gpu in np.unique(gpu_te):
            tr, te = gpu_tr == gpu, gpu_te == gpu
            design = np.column_stack([xtr[c][tr] for c in form]) / y[tr, None]
            scale = design.max(axis=0)
            coef, _ = nnls(design / scale, np.ones(int(tr.sum())))
            out[te] = np.column_stack([xte[c][te] for c in form]) @ (coef / scale)
        return out

    return fit_predict


def compare_forms(rows: pd.DataFrame, features: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """LOMO MAPE per GPU for each form, and per (GPU, model) for every form."""
    summary, per_model = [], {}
    for name, form in FORMS.items():
        cv = leave_one_group_out(
            _fit_predict(features, form), rows, "Model (temp)", target_col="Step Time (s)"
        )
        per = error_summary(cv, ["GPU (temp)", "Model (temp)"]).set_index(
            ["GPU (temp)", "Model (temp)"]
        )["mape_pct"]
        gpu = error_summary(cv, ["GPU (temp)"]).set_index("GPU (temp)")["mape_pct"]
        worst = per.idxmax()
        summary.append(
            {
                "form": name,
                "K80": gpu["K80"],
                "P100": gpu["P100"],
                "worst": f"{worst[0]} {worst[1]} {per.max():.1f}",
                "over_8pct": int((per > 8).sum()),
            }
        )
        per_model[name] = per
    return pd.DataFrame(summary), pd.DataFrame(per_model)


if __name__ == "__main__":
    pd.set_option("display.width", 160)
    print(feature_table().to_string())
