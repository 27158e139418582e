"""The workloads of the published calibration data: parameter counts, options, meta batches.

Each count is the reference implementation's (named in the workload modules' docstrings):
torchvision for the ImageNet models, kuangliu/pytorch-cifar, deepspeech.pytorch, guoyang9/NCF
(Pollux), HuggingFace ``BertForMaskedLM``, PyTorch's word_language_model, MLPerf's 3D U-Net.
The architectures are built on ``meta``: no memory, so full size is cheap.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gpucast.domain.errors import InvalidSpecError
from gpucast.workloads import get_workload, list_workloads

META = torch.device("meta")

NEW = (
    "resnet18",
    "cifar-resnet18",
    "shufflenetv2",
    "deepspeech2",
    "ncf",
    "bert-large",
    "transformer-base",
    "lstm-lm",
    "unet3d",
)


def params(name: str, **options: object) -> int:
    model = get_workload(name, **options).build_model(META)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    ("name", "options", "expected"),
    [
        ("resnet18", {}, 11_689_512),  # torchvision resnet18
        ("cifar-resnet18", {}, 11_173_962),  # kuangliu/pytorch-cifar ResNet18
        ("shufflenetv2", {}, 1_356_104),  # 1.0x, CIFAR stem, 100 classes
        ("shufflenetv2", {"num_classes": 1000, "image_size": 224}, 2_278_604),  # torchvision
        ("deepspeech2", {}, 86_618_400),  # deepspeech.pytorch, 5 x BiLSTM 1024
        ("ncf", {}, 1_602_657),  # guoyang9/NCF NeuMF-end, factors 32, 3 layers, ML-1M
        ("bert-large", {}, 335_174_458),  # HuggingFace BertForMaskedLM (bert-large)
        ("transformer-base", {}, 60_915_712),  # shared 32,768 vocabulary
        ("transformer-base", {"vocab": 37_000}, 63_082_496),  # the paper's ~37k BPE
        ("lstm-lm", {}, 28_434_378),  # 650 units, tied, WikiText-2
        ("lstm-lm", {"tied": "false"}, 50_065_078),
        ("lstm-lm", {"hidden": 1500}, 85_974_278),  # the "large" model, tied
        ("unet3d", {}, 31_190_243),  # MLPerf Unet3D(1, 3, instancenorm, relu)
    ],
)
def test_parameter_counts_match_the_references(name: str, options: dict, expected: int) -> None:
    assert params(name, **options) == expected


def test_new_names_are_listed_sorted_with_families() -> None:
    names = list_workloads()
    assert set(NEW) <= set(names)
    assert names == sorted(names)
    families = {name: get_workload(name).family for name in NEW}
    assert families["deepspeech2"] == "speech"
    assert families["ncf"] == "recommendation"
    assert {families[n] for n in ("bert-large", "transformer-base", "lstm-lm")} == {"language"}
    assert {families[n] for n in ("resnet18", "shufflenetv2", "unet3d")} == {"vision"}
    assert get_workload("unet3d").sample_unit == "volumes"
    assert get_workload("deepspeech2").sample_unit == "utterances"


@pytest.mark.parametrize("name", NEW)
def test_batches_are_made_on_meta(name: str) -> None:
    inputs, target = get_workload(name).make_batch(3, META)
    assert inputs[0].shape[0] == 3
    assert target.shape[0] == 3


def test_resnet18_is_torchvisions_layout() -> None:
    model = get_workload("resnet18").build_model(META)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 1 + 16 + 3  # stem, 8 blocks x 2, 3 projection shortcuts
    assert convs[0].kernel_size == (7, 7)


def test_cifar_resnet18_has_a_3x3_stem_and_no_maxpool() -> None:
    model = get_workload("cifar-resnet18").build_model(META)
    first = next(m for m in model.modules() if isinstance(m, nn.Conv2d))
    assert (first.kernel_size, first.stride) == ((3, 3), (1, 1))
    assert not any(isinstance(m, nn.MaxPool2d) for m in model.modules())


def test_shufflenet_stem_follows_image_size() -> None:
    cifar = get_workload("shufflenetv2").build_model(META)
    imagenet = get_workload("shufflenetv2", image_size=224).build_model(META)
    assert not any(isinstance(m, nn.MaxPool2d) for m in cifar.modules())
    assert any(isinstance(m, nn.MaxPool2d) for m in imagenet.modules())
    with pytest.raises(InvalidSpecError, match="stem"):
        get_workload("shufflenetv2", stem="mnist")
    with pytest.raises(InvalidSpecError, match="image_size"):
        get_workload("shufflenetv2", image_size=4)


def test_deepspeech2_shapes() -> None:
    workload = get_workload("deepspeech2")
    (spectrogram,), transcripts = workload.make_batch(2, META)
    assert spectrogram.shape == (2, 1, 161, 1000)  # 161 bins, 10 s at 10 ms
    assert transcripts.shape == (2, 150)  # 15 characters a second
    model = workload.build_model(META)
    lstms = [m for m in model.modules() if isinstance(m, nn.LSTM)]
    assert len(lstms) == 5
    assert all(m.bidirectional and m.hidden_size == 1024 for m in lstms)
    assert lstms[0].input_size == 32 * 41
    assert model.output_steps(1000) == 500  # time halved by the first convolution
    small = get_workload("deepspeech2", seq_len=21, hidden=8)  # meta LSTMs run step by step
    (short,), _ = small.make_batch(2, META)
    assert small.build_model(META)(short).shape == (11, 2, 29)  # 29 characters
    with pytest.raises(InvalidSpecError, match="chars"):
        get_workload("deepspeech2", seq_len=20, chars=50)


def test_ncf_batch_holds_four_negatives_per_positive() -> None:
    (users, items), labels = get_workload("ncf").make_batch(10, torch.device("cpu"))
    assert labels.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0] * 2
    assert int(users.max()) < 6040 and int(items.max()) < 3706


def test_lstm_lm_is_tied_by_default() -> None:
    model = get_workload("lstm-lm").build_model(META)
    matrices = [p for p in model.parameters() if p.shape == (33278, 650)]
    assert len(matrices) == 1
    with pytest.raises(InvalidSpecError, match="tied"):
        get_workload("lstm-lm", tied="sometimes")


def test_transformer_shares_one_embedding() -> None:
    model = get_workload("transformer-base", layers=1).build_model(META)
    assert len([p for p in model.parameters() if p.shape == (32768, 512)]) == 1


def test_unet3d_options() -> None:
    (volumes,), labels = get_workload("unet3d").make_batch(2, META)
    assert volumes.shape == (2, 1, 128, 128, 128)
    assert labels.shape == (2, 128, 128, 128)
    with pytest.raises(InvalidSpecError, match="patch"):
        get_workload("unet3d", patch=96 + 16)
    with pytest.raises(InvalidSpecError, match="patch"):
        get_workload("unet3d", patch=32)


def test_unet3d_dice_ce_loss_rewards_a_perfect_segmentation() -> None:
    workload = get_workload("unet3d", patch=64)
    labels = torch.randint(0, 3, (2, 4, 4, 4))
    perfect = 50.0 * torch.nn.functional.one_hot(labels, 3).movedim(-1, 1).float()
    wrong = perfect.roll(1, dims=1)
    assert float(workload.loss(perfect, labels)) < 1e-3
    assert float(workload.loss(wrong, labels)) > 0.9


def test_bert_large_sequence_defaults_to_mlperf_512() -> None:
    (tokens, _types), labels = get_workload("bert-large").make_batch(1, META)
    assert tokens.shape == labels.shape == (1, 512)
    # the fix names the -o option the verbs take (session 34 QA: it said --seq-len, which
    # predict train, profile and measure train do not have)
    with pytest.raises(InvalidSpecError, match=r"seq_len.*e\.g\. -o seq_len=512"):
        get_workload("bert-large", seq_len=1024)
