"""An option set names a configuration by what it builds: options at their built-in values
drop out, values read as the workload resolves them (``workloads.canonical_options``)."""

from __future__ import annotations

import pytest

from gpucast.domain.errors import InvalidSpecError, UnknownWorkloadError
from gpucast.workloads import canonical_options, configuration_name, get_workload
from gpucast.workloads.registry import list_workloads


@pytest.mark.parametrize("name", list_workloads())
def test_every_built_in_declares_its_options_and_its_defaults_name_it(name: str) -> None:
    resolved = get_workload(name).options
    assert resolved, f"{name} declares no options"
    assert canonical_options(name, tuple(resolved.items())) == ()
    assert configuration_name(name, tuple(resolved.items())) == name


@pytest.mark.parametrize(
    ("name", "options", "expected"),
    [
        ("mlp", (("hidden", "1024,1024"),), ()),
        ("mlp", (("hidden", "64"),), (("hidden", (64,)),)),
        ("bert-base", (("seq_len", 1e3 / 2), ("layers", 12)), (("seq_len", 500),)),
        ("shufflenetv2", (("stem", "imagenet"), ("image_size", 224)), (("image_size", 224),)),
        ("shufflenetv2", (("stem", "cifar"), ("image_size", 32)), ()),
        ("lstm-lm", (("tied", "false"),), (("tied", False),)),
        ("cifar-resnet18", (("width", 64),), ()),
        ("cifar-resnet20", (("width", 64),), (("width", 64),)),
        ("deepspeech2", (("seq_len", 2000), ("chars", 300)), (("seq_len", 2000),)),
    ],
)
def test_options_that_change_nothing_drop_out(name: str, options: tuple, expected: tuple) -> None:
    assert canonical_options(name, options) == expected


def test_the_name_reads_as_typed() -> None:
    assert configuration_name("LSTM-LM", (("tied", "no"),)) == "lstm-lm -o tied=false"
    assert configuration_name("mlp", (("hidden", "16,8"),)) == "mlp -o hidden=16,8"


def test_a_user_models_options_are_kept_as_given_and_bad_options_raise() -> None:
    assert canonical_options("my_models:build", (("width", 8),)) == (("width", 8),)
    with pytest.raises(InvalidSpecError, match="bogus"):
        canonical_options("mlp", (("bogus", 1),))
    with pytest.raises(UnknownWorkloadError):
        canonical_options("no-such-model", (("width", 1),))
