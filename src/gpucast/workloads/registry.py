"""Names → workload factories: one explicit table, plus ``cifar-resnetN`` and user models."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gpucast.domain.errors import UnknownWorkloadError
from gpucast.workloads import detection, diffusion, language, other, speech, vision
from gpucast.workloads.base import Workload
from gpucast.workloads.user import is_user_spec, load_user_workload

_CIFAR_RESNET = re.compile(r"^cifar-resnet(\d+)$")

# The built-ins, by the name the CLI knows them by. ``cifar-resnetN`` takes any N = 6n+2 (and 15,
# 18); the depths listed here are the usual ones, shown by ``list_workloads``.
_FACTORIES: dict[str, Callable[..., Workload]] = {
    "shake-shake": vision.shake_shake,
    "resnet18": vision.resnet18,
    "resnet50": vision.resnet50,
    "shufflenetv2": vision.shufflenetv2,
    "unet3d": vision.unet3d,
    "retinanet": detection.retinanet,
    "stable-diffusion": diffusion.stable_diffusion,
    "bert-base": language.bert_base,
    "bert-large": language.bert_large,
    "gpt2-small": language.gpt2_small,
    "transformer-base": language.transformer_base,
    "lstm-lm": language.lstm_lm,
    "deepspeech2": speech.deepspeech2,
    "dlrm": other.dlrm,
    "ncf": other.ncf,
    "gcn": other.gcn,
    "mlp": other.mlp,
}
_CIFAR_DEPTHS = (15, 18, 20, 32, 44, 56, 110)


def list_workloads() -> list[str]:
    """The built-in workload names, sorted (cifar-resnetN also accepts other depths 6n+2)."""
    return sorted([*_FACTORIES, *(f"cifar-resnet{d}" for d in _CIFAR_DEPTHS)])


def get_workload(name: str, **options: Any) -> Workload:
    """The workload called ``name`` (a built-in or ``module:factory``), built with ``options``.

    Raises UnknownWorkloadError (with close matches) for an unknown name and InvalidSpecError
    for a bad option.
    """
    if is_user_spec(name):
        return load_user_workload(name, **options)
    key = name.strip().lower()
    match = _CIFAR_RESNET.match(key)
    if match is not None:
        return vision.cifar_resnet(int(match.group(1)), **options)
    factory = _FACTORIES.get(key)
    if factory is None:
        raise UnknownWorkloadError(
            name, list_workloads(), fix="or give a user model as module:factory"
        )
    return factory(**options)
