"""Object detection, written here (no torchvision): the MLPerf Training RetinaNet.

``retinanet`` is the model of MLPerf Training's ``ssd`` benchmark (since v3.0:
mlcommons/training ``single_stage_detector/ssd``, torchvision's ``retinanet_resnext50_32x4d_fpn``
with 264 OpenImages classes at 800x800):

* backbone: ResNeXt-50 32x4d (torchvision's: bottlenecks [3, 4, 6, 3], 3x3 convolutions in
  32 groups of 4 x stage-width / 64 channels), frozen batch norm (a fixed affine, as
  torchvision's detection backbones use) and the stem and first stage frozen
  (``trainable_backbone_layers=3``, the reference's default): no weight gradients there;
* FPN over stages 2-4 (1x1 laterals to 256 channels, top-down nearest upsampling, 3x3 output
  convolutions) plus P6/P7 (3x3 stride-2 convolutions on P5, then on ReLU(P6));
* heads shared over the five levels: classification four 3x3 256-channel convolutions with
  ReLU and a 3x3 convolution to 9 anchors x classes, regression the same to 9 x 4;
* loss: sigmoid focal loss (alpha 0.25, gamma 2) over every anchor and class, normalised by
  the foreground anchors, plus L1 on the foreground anchors' boxes. Targets are drawn at
  random (a share ``foreground`` of the anchors matched to a random class): anchor matching
  on the host is not modelled.

At 800x800 there are 120,087 anchors per image: the focal loss runs over 31.7 M logits per
image, which is a large part of the step's memory traffic.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from gpucast.domain.errors import InvalidSpecError
from gpucast.workloads._options import positive_int, reject_unknown
from gpucast.workloads.base import Batch, Workload

ANCHORS_PER_LOCATION = 9
FPN_CHANNELS = 256


class _FrozenBatchNorm(nn.Module):
    """Batch norm with fixed statistics and affine (buffers, no gradients)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.register_buffer("scale", torch.ones(channels))
        self.register_buffer("shift", torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale[:, None, None] + self.shift[:, None, None]


class _GroupedBottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_channels: int, planes: int, stride: int, groups: int, base: int):
        super().__init__()
        width = planes * base // 64 * groups
        out_channels = planes * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = _FrozenBatchNorm(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, groups=groups, bias=False)
        self.bn2 = _FrozenBatchNorm(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = _FrozenBatchNorm(out_channels)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                _FrozenBatchNorm(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        return F.relu(self.bn3(self.conv3(out)) + identity)


def _head(out_channels: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for _ in range(4):
        layers += [nn.Conv2d(FPN_CHANNELS, FPN_CHANNELS, 3, padding=1), nn.ReLU()]
    layers.append(nn.Conv2d(FPN_CHANNELS, out_channels, 3, padding=1))
    return nn.Sequential(*layers)


class RetinaNet(nn.Module):
    """RetinaNet on a ResNeXt-50 32x4d FPN (see the module docstring). ``forward`` returns the
    class logits ``(N, anchors, classes)`` and box deltas ``(N, anchors, 4)``."""

    def __init__(self, num_classes: int, *, trainable_layers: int = 3) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = _FrozenBatchNorm(64)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        in_channels = 64
        stages: list[nn.Sequential] = []
        for index, (planes, count) in enumerate(
            zip((64, 128, 256, 512), (3, 4, 6, 3), strict=True)
        ):
            blocks = []
            for block in range(count):
                stride = 2 if index > 0 and block == 0 else 1
                blocks.append(_GroupedBottleneck(in_channels, planes, stride, groups=32, base=4))
                in_channels = planes * _GroupedBottleneck.expansion
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        frozen: list[nn.Module] = [self.conv1, self.layer1, self.layer2, self.layer3, self.layer4]
        for module in frozen[: len(frozen) - trainable_layers]:
            module.requires_grad_(False)
        self.lateral = nn.ModuleList(nn.Conv2d(c, FPN_CHANNELS, 1) for c in (512, 1024, 2048))
        self.output = nn.ModuleList(
            nn.Conv2d(FPN_CHANNELS, FPN_CHANNELS, 3, padding=1) for _ in range(3)
        )
        self.p6 = nn.Conv2d(FPN_CHANNELS, FPN_CHANNELS, 3, 2, 1)
        self.p7 = nn.Conv2d(FPN_CHANNELS, FPN_CHANNELS, 3, 2, 1)
        self.cls_head = _head(ANCHORS_PER_LOCATION * num_classes)
        self.box_head = _head(ANCHORS_PER_LOCATION * 4)

    def _features(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        c3 = self.layer2(self.layer1(x))
        c4 = self.layer3(c3)
        c5 = self.layer4(c4)
        inner = self.lateral[2](c5)
        levels = [self.output[2](inner)]
        for lateral, output, c in (
            (self.lateral[1], self.output[1], c4),
            (self.lateral[0], self.output[0], c3),
        ):
            inner = lateral(c) + F.interpolate(inner, size=c.shape[-2:], mode="nearest")
            levels.insert(0, output(inner))
        p6 = self.p6(levels[-1])
        return [*levels, p6, self.p7(F.relu(p6))]

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits, boxes = [], []
        for feature in self._features(images):
            n, _, h, w = feature.shape
            cls = self.cls_head(feature).view(n, ANCHORS_PER_LOCATION, self.num_classes, h, w)
            box = self.box_head(feature).view(n, ANCHORS_PER_LOCATION, 4, h, w)
            logits.append(cls.permute(0, 3, 4, 1, 2).reshape(n, -1, self.num_classes))
            boxes.append(box.permute(0, 3, 4, 1, 2).reshape(n, -1, 4))
        return torch.cat(logits, dim=1), torch.cat(boxes, dim=1)


def anchors_per_image(resolution: int) -> int:
    """Anchors over the five levels (strides 8-128, convolution arithmetic of the model)."""
    size = (resolution + 1) // 2  # stem convolution
    size = (size + 1) // 2  # max-pool
    total = 0
    for _ in range(5):  # C3, C4, C5, P6, P7: each a stride-2 3x3 convolution further
        size = (size + 1) // 2
        total += size * size * ANCHORS_PER_LOCATION
    return total


def _focal_box_loss(output: Any, target: Any) -> torch.Tensor:
    """Sigmoid focal loss over every anchor and class plus L1 on foreground boxes, both
    normalised by the number of foreground anchors (torchvision's RetinaNet losses)."""
    logits, boxes = output
    labels, box_targets = target
    foreground = (labels >= 0).to(logits.dtype)
    one_hot = F.one_hot(labels.clamp(min=0), logits.shape[-1]).to(logits.dtype)
    one_hot = one_hot * foreground.unsqueeze(-1)
    probability = torch.sigmoid(logits)
    ce = F.binary_cross_entropy_with_logits(logits, one_hot, reduction="none")
    p_t = probability * one_hot + (1 - probability) * (1 - one_hot)
    alpha_t = 0.25 * one_hot + 0.75 * (1 - one_hot)
    focal = (alpha_t * ce * (1 - p_t) ** 2).sum()
    l1 = ((boxes - box_targets).abs().sum(-1) * foreground).sum()
    return (focal + l1) / foreground.sum().clamp(min=1.0)


def retinanet(**options: Any) -> Workload:
    """``retinanet``; options ``resolution`` (800, >= 128), ``num_classes`` (264,
    MLPerf's OpenImages subset), ``trainable_layers`` (3: backbone stages 2-4),
    ``foreground`` (per mille of anchors matched to an object in the random targets, 10)."""
    reject_unknown(
        "retinanet", options, ("resolution", "num_classes", "trainable_layers", "foreground")
    )
    resolution = positive_int("resolution", options.get("resolution", 800))
    num_classes = positive_int("num_classes", options.get("num_classes", 264))
    trainable = int(options.get("trainable_layers", 3))
    foreground = positive_int("foreground", options.get("foreground", 10))
    if resolution < 128:
        raise InvalidSpecError(
            "resolution", "must be >= 128 (seven halvings down to P7)",
            got=resolution, fix="e.g. --option resolution=800",
        )  # fmt: skip
    if not 0 <= trainable <= 5:
        raise InvalidSpecError(
            "trainable_layers", "must be 0-5 (backbone stages with gradients)", got=trainable
        )
    if foreground > 1000:
        raise InvalidSpecError("foreground", "is per mille: at most 1000", got=foreground)
    anchors = anchors_per_image(resolution)

    def build_model(device: torch.device) -> nn.Module:
        with torch.device(device):
            return RetinaNet(num_classes, trainable_layers=trainable)

    def make_batch(batch_size: int, device: torch.device) -> Batch:
        images = torch.randn(batch_size, 3, resolution, resolution, device=device)
        labels = torch.randint(0, num_classes, (batch_size, anchors), device=device)
        matched = torch.rand(batch_size, anchors, device=device) < foreground / 1000
        labels = torch.where(matched, labels, torch.full_like(labels, -1))
        boxes = torch.randn(batch_size, anchors, 4, device=device)
        return (images,), (labels, boxes)

    return Workload(
        name="retinanet",
        family="vision",
        sample_unit="images",
        build_model=build_model,
        make_batch=make_batch,
        loss=_focal_box_loss,
        description=f"RetinaNet ResNeXt-50 32x4d FPN (MLPerf ssd), {resolution}x{resolution}, "
        f"{num_classes} classes, {anchors:,} anchors",
        options={
            "resolution": resolution,
            "num_classes": num_classes,
            "trainable_layers": trainable,
            "foreground": foreground,
        },
    )
