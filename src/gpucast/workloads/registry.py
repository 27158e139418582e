"""Names → workload factories: one explicit table, plus ``cifar-resnetN`` and user models."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gpucast.domain.errors import GpucastError, UnknownWorkloadError
from gpucast.domain.workload import WorkloadOptions, configured_name, option_text
from gpucast.workloads import detection, diffusion, language, other, speech, vision
from gpucast.workloads.base import Workload
from gpucast.workloads.user import (
    is_user_spec,
    load_user_workload,
    typed_user_options,
    user_option_defaults,
)

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


def get_workload(name: str, /, **options: Any) -> Workload:
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


def canonical_options(name: str, options: WorkloadOptions) -> WorkloadOptions:
    """``options`` less those that change nothing, each value as the workload resolves it:
    ``mlp`` with ``hidden=1024,1024`` (its default) is plain ``mlp``, ``seq_len=1e3`` is
    ``seq_len=1000``, and ``shufflenetv2`` with ``image_size=224,stem=imagenet`` is
    ``image_size=224`` (the stem that size takes anyway). An option is dropped when leaving it
    out builds the same configuration (:attr:`Workload.options`); a user model's options are
    all kept (its factory's defaults are its own), each as its factory's parameter takes it
    (:func:`~gpucast.workloads.user.typed_user_options`: ``width=1e2`` is ``width=100`` for
    ``width: int``; as given where the factory cannot be loaded: the load that follows says
    why). Raises as :func:`get_workload` does."""
    if not options:
        return tuple(options)
    if is_user_spec(name):
        try:
            return typed_user_options(name, options)
        except GpucastError:
            return tuple(options)
    given = dict(options)
    resolved = get_workload(name, **given).options
    for key in sorted(given):
        rest = {k: v for k, v in given.items() if k != key}
        if get_workload(name, **rest).options == resolved:
            given = rest
    return tuple((key, resolved[key]) for key in sorted(given))


def option_example(name: str) -> tuple[str, tuple[str, ...]] | None:
    """One option workload ``name`` declares, at its built-in value as typed after ``-o``
    (``seq_len=128``; a one-value option first), and the names of all it declares; a user
    model's are its factory's keyword parameters with a default (QA 39: its example was
    ``name=value``); ``None`` for an unknown name or a workload that declares none."""
    try:
        options = user_option_defaults(name) if is_user_spec(name) else get_workload(name).options
    except GpucastError:
        return None
    if not options:
        return None
    key = next((k for k, v in options.items() if not isinstance(v, tuple)), next(iter(options)))
    return option_text(key, options[key]), tuple(sorted(options))


def configuration_name(name: str, options: WorkloadOptions) -> str:
    """The name a measurement of ``name`` with ``options`` is stored under and looked up by:
    :func:`gpucast.domain.workload.configured_name` of the :func:`canonical_options`, so an
    option at its built-in value calibrates (and is calibrated by) the built-in workload."""
    return configured_name(name, canonical_options(name, options))
