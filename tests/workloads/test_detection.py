"""RetinaNet, the model of MLPerf Training's ssd benchmark: shapes, frozen layers, loss."""

from __future__ import annotations

import pytest
import torch

from gpucast.domain.errors import InvalidSpecError
from gpucast.workloads import get_workload, list_workloads
from gpucast.workloads.detection import ANCHORS_PER_LOCATION, anchors_per_image

META = torch.device("meta")


def test_800_pixels_give_mlperfs_five_levels_of_anchors() -> None:
    # feature maps 100, 50, 25, 13, 7 (strides 8-128), nine anchors each
    assert anchors_per_image(800) == 9 * (100**2 + 50**2 + 25**2 + 13**2 + 7**2) == 120_087
    workload = get_workload("retinanet")
    model = workload.build_model(META)
    (images,), (labels, boxes) = workload.make_batch(2, META)
    logits, deltas = model(images)
    assert logits.shape == (2, 120_087, 264)
    assert deltas.shape == boxes.shape == (2, 120_087, 4)
    assert labels.shape == (2, 120_087)
    assert "retinanet" in list_workloads() and workload.family == "vision"


def test_each_class_adds_one_output_channel_per_anchor() -> None:
    def params(classes: int) -> int:
        model = get_workload("retinanet", num_classes=classes).build_model(META)
        return sum(p.numel() for p in model.parameters())

    # the classification head's last 3x3 convolution: 9 anchors x (256 x 3 x 3 + bias)
    assert params(265) - params(264) == ANCHORS_PER_LOCATION * (256 * 9 + 1)


def test_the_stem_and_first_stage_are_frozen_by_default() -> None:
    model = get_workload("retinanet").build_model(META)
    frozen = {n.split(".")[0] for n, p in model.named_parameters() if not p.requires_grad}
    assert frozen == {"conv1", "layer1"}
    everything = get_workload("retinanet", trainable_layers=5).build_model(META)
    assert all(p.requires_grad for p in everything.parameters())


def test_a_real_step_trains_the_unfrozen_layers_only() -> None:
    workload = get_workload("retinanet", resolution=128, num_classes=5)
    torch.manual_seed(0)
    model = workload.build_model(torch.device("cpu"))
    inputs, target = workload.make_batch(1, torch.device("cpu"))
    workload.loss(model(*inputs), target).backward()
    assert model.layer1[0].conv1.weight.grad is None
    assert model.layer2[0].conv1.weight.grad is not None
    assert model.cls_head[-1].weight.grad is not None


def test_focal_loss_is_small_for_confident_right_answers() -> None:
    workload = get_workload("retinanet", num_classes=3)
    labels = torch.tensor([[0, -1, 2, -1]])
    boxes = torch.randn(1, 4, 4)
    right = torch.full((1, 4, 3), -20.0)
    right[0, 0, 0] = right[0, 2, 2] = 20.0
    wrong = -right
    assert float(workload.loss((right, boxes), (labels, boxes))) < 1e-6
    assert float(workload.loss((wrong, boxes + 1), (labels, boxes))) > 10.0


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"resolution": 64}, "resolution"),
        ({"foreground": 2000}, "foreground"),
        ({"trainable_layers": 7}, "trainable_layers"),
        ({"anchors": 3}, "anchors"),
    ],
)
def test_bad_options_name_the_field(options: dict[str, int], field: str) -> None:
    with pytest.raises(InvalidSpecError, match=field):
        get_workload("retinanet", **options)
