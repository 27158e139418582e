"""The registry of built-in workloads: names, errors, and architectures checked by counts."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from gpucast.domain.errors import InvalidSpecError, UnknownWorkloadError
from gpucast.workloads import get_workload, list_workloads

META = torch.device("meta")


def params(name: str, **options: object) -> int:
    model = get_workload(name, **options).build_model(META)
    return sum(p.numel() for p in model.parameters())


def test_list_workloads_names_every_family() -> None:
    names = list_workloads()
    for expected in (
        "cifar-resnet20",
        "cifar-resnet110",
        "cifar-resnet15",
        "shake-shake",
        "resnet50",
        "bert-base",
        "gpt2-small",
        "dlrm",
        "gcn",
        "mlp",
    ):
        assert expected in names
    assert names == sorted(names)


def test_unknown_name_lists_close_matches() -> None:
    with pytest.raises(UnknownWorkloadError) as info:
        get_workload("resnet5")
    assert "resnet50" in info.value.close_matches
    assert info.value.exit_code == 2


@pytest.mark.parametrize("depth", [21, 7, 2])
def test_cifar_resnet_depth_must_be_6n_plus_2(depth: int) -> None:
    with pytest.raises(InvalidSpecError, match="6n\\+2"):
        get_workload(f"cifar-resnet{depth}")


def test_unknown_option_is_named() -> None:
    with pytest.raises(InvalidSpecError, match="seq_lenn"):
        get_workload("gpt2-small", seq_lenn=12)
    with pytest.raises(InvalidSpecError, match="seq_len"):
        get_workload("gpt2-small", seq_len=2048)
    with pytest.raises(InvalidSpecError, match="width"):
        get_workload("shake-shake", width=0)


@pytest.mark.parametrize(
    ("name", "option"),
    [("cifar-resnet32", "depth"), ("resnet50", "name"), ("cifar-resnet32", "name")],
)
def test_an_option_named_as_a_factory_argument_is_unknown(name: str, option: str) -> None:
    # QA 38 A #1: -o depth=20 on cifar-resnet32 (-o name=x anywhere) raised TypeError "got
    # multiple values for argument" (a traceback) instead of naming the option
    with pytest.raises(InvalidSpecError, match=f"{name} option '{option}': is not an option"):
        get_workload(name, **{option: 20})


def test_resnet50_is_torchvisions() -> None:
    assert params("resnet50") == 25_557_032


@pytest.mark.parametrize(
    ("name", "options", "expected"),
    [
        ("cifar-resnet20", {}, 269_722),  # He et al.: 0.27 M
        ("cifar-resnet110", {}, 1_727_962),  # He et al.: 1.7 M
        ("shake-shake", {"width": 32}, 2_923_162),  # Gastaldi: 2.9 M
        ("shake-shake", {"width": 96}, 26_192_922),  # Gastaldi: 26.2 M
        ("bert-base", {}, 109_514_298),  # HuggingFace BertForMaskedLM
        ("gpt2-small", {}, 124_439_808),  # HuggingFace GPT2LMHeadModel (tied head)
    ],
)
def test_parameter_counts_match_the_literature(name: str, options: dict, expected: int) -> None:
    assert params(name, **options) == expected


def test_cifar_resnet15_matches_cmdare_tensor_features() -> None:
    # CM-DARE's Res15: 50 parameter tensors, largest 0.5625 MiB (128x128x3x3 fp32).
    model = get_workload("cifar-resnet15").build_model(META)
    tensors = list(model.parameters())
    assert len(tensors) == 50
    assert max(t.numel() * 4 for t in tensors) / 2**20 == 0.5625


@settings(max_examples=15, deadline=None)
@given(st.integers(min_value=1, max_value=30))
def test_cifar_resnet_depth_counts_weighted_layers(n: int) -> None:
    depth = 6 * n + 2
    model = get_workload(f"cifar-resnet{depth}").build_model(META)
    layers = [m for m in model.modules() if isinstance(m, nn.Conv2d | nn.Linear)]
    assert len(layers) == depth  # option A shortcuts have no weights


def test_gpt2_embeddings_are_tied() -> None:
    model = get_workload("gpt2-small", layers=1).build_model(META)
    matrices = [p for p in model.parameters() if p.shape == (50257, 768)]
    assert len(matrices) == 1


def test_dlrm_tables_follow_options() -> None:
    model = get_workload(
        "dlrm", table_sizes=(10, 20, 30), embedding_dim=4, bottom_mlp=(8, 4), top_mlp=(8,)
    ).build_model(META)
    tables = [m for m in model.modules() if isinstance(m, nn.EmbeddingBag)]
    assert [t.num_embeddings for t in tables] == [10, 20, 30]
    with pytest.raises(InvalidSpecError, match="bottom_mlp"):
        get_workload("dlrm", embedding_dim=4, bottom_mlp=(8, 5))


def test_batches_work_on_meta() -> None:
    for name in ("resnet50", "bert-base", "gpt2-small", "dlrm", "gcn", "mlp", "shake-shake"):
        inputs, _target = get_workload(name).make_batch(3, META)
        assert inputs[0].shape[0] == 3


def test_a_whole_number_written_as_a_float_is_that_integer() -> None:
    """QA session 36: `-o seq_len=1e12` said `must be an integer >= 1` (1e12 is >= 1); the
    bound it breaks is the model's 512 positions, which `-o seq_len=1000000000000` named."""
    from gpucast.workloads._options import positive_int

    assert positive_int("seq_len", 128.0) == 128 and isinstance(positive_int("seq_len", 1e2), int)
    with pytest.raises(InvalidSpecError, match=r"must be <= 512"):
        get_workload("bert-base", seq_len=1e12)
    for bad in (2.5, float("inf"), float("nan"), 0.0):
        with pytest.raises(InvalidSpecError, match="must be an integer >= 1"):
            positive_int("seq_len", bad)
