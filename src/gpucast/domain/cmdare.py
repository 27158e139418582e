"""The CM-DARE column format: the column names of its single-GPU speed table, and the rule
that a model's properties are the same on every row of that model.

Shared by the importers (:mod:`gpucast.store.datasets.cmdare_speed`), the speed model
(:mod:`gpucast.predict.speed`) and the rows ``gpucast predict cluster|checkpoint`` read
(:mod:`gpucast.store.datasets.rows`), so none of them imports another for a column name.
Pure: pandas is imported only by :func:`impute_model_properties`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

GPU_COL = "GPU (temp)"
MODEL_COL = "Model (temp)"
TFLOPS_COL = "GPU TFLOPS"
FLOPS_COL = "Model FLOPs"
AVG_TENSOR_COL = "Average Tensor Size (MB)"
MAX_TENSOR_COL = "Max Tensor Size (MB)"
PARAMS_COL = "Number of Parameters"
TENSORS_COL = "Number of Tensors"
STEP_TIME_COL = "Step Time (s)"

#: Numeric feature columns the speed model needs on every row.
FEATURE_COLUMNS: tuple[str, ...] = (FLOPS_COL, PARAMS_COL, TENSORS_COL)
#: Columns that describe the model, not the run: equal on every row of one model.
MODEL_PROPERTY_COLUMNS: tuple[str, ...] = (
    FLOPS_COL,
    AVG_TENSOR_COL,
    MAX_TENSOR_COL,
    PARAMS_COL,
    TENSORS_COL,
)


def impute_model_properties(rows: pd.DataFrame) -> pd.DataFrame:
    """Fill empty model-property cells from other rows of the same model (``Model (temp)``).

    Model properties (FLOPs, parameters, tensors) do not depend on the run, and CM-DARE leaves
    some of them empty on some rows (e.g. ``Number of Tensors`` for P100 ``custom9``). Returns
    a new frame; cells stay empty when no row of the model has a value.
    """
    import pandas as pd

    out = rows.copy()
    if MODEL_COL not in out.columns:
        return out
    for column in MODEL_PROPERTY_COLUMNS:
        if column not in out.columns:
            continue
        values = pd.to_numeric(out[column], errors="coerce")
        if not values.isna().any():
            continue
        filled = values.groupby(out[MODEL_COL]).transform("median")
        out[column] = values.fillna(filled)
    return out


#: CM-DARE's 14 CIFAR-10 models as gpucast built-ins with options (architectures rebuilt to
#: the parameter: ``benchmarks/cmdare_architectures.py`` documents the derivation). All were
#: trained with batch :data:`CMDARE_BATCH`, FP32, momentum SGD, TensorFlow 1.10.
CMDARE_WORKLOADS: dict[str, tuple[str, dict[str, object]]] = {
    "Res15": ("cifar-resnet15", {}),
    "custom1": ("cifar-resnet15", {"blocks": "2,3,3"}),
    "custom2": ("cifar-resnet15", {"blocks": "2,5,3"}),
    "custom9": ("cifar-resnet15", {"blocks": "6,6,6"}),
    "custom4": ("cifar-resnet15", {"blocks": "7,7,7"}),
    "custom5": ("cifar-resnet15", {"blocks": "8,9,9"}),
    "custom6": ("cifar-resnet15", {"blocks": "10,13,12"}),
    "custom8": ("cifar-resnet15", {"blocks": "16,20,16"}),
    "shake16": ("shake-shake", {"width": 16}),
    "shakesmall": ("shake-shake", {"width": 32}),
    "shake small 32d": ("shake-shake", {"width": 32, "blocks": 5}),
    "shakemid": ("shake-shake", {"width": 64}),
    "shake80": ("shake-shake", {"width": 80}),
    "shakebig": ("shake-shake", {"width": 96}),
}
CMDARE_BATCH = 128
