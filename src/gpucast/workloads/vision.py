"""Image classifiers, written here (no torchvision): CIFAR ResNets, Shake-Shake, ResNet-50.

Choices, so that the numbers can be checked against the literature:

* ``cifar-resnetN`` (N = 6n + 2) is He et al. 2016, section 4.2: a 3x3 stem of 16 filters,
  three stages of n basic blocks with 16/32/64 filters (scaled by ``width``/16), and the
  parameter-free "option A" shortcut (stride-2 subsampling plus zero-padded channels).
  cifar-resnet20 has 0.27 M parameters, cifar-resnet110 1.7 M, as in the paper.
* ``cifar-resnet15`` is Tensor2Tensor's ``resnet_cifar_15`` as used in the CM-DARE data:
  residual blocks [2, 2, 2] of basic blocks, ``filter_sizes`` [16, 32, 64, 128] (a 16-filter
  stem, then stages of 32/64/128 filters at strides 1/2/2), with 1x1-convolution projection
  shortcuts where the shape changes (T2T's ``projection_shortcut``). We use post-activation
  blocks like the other CIFAR ResNets; T2T's pre-activation order changes no FLOP or parameter.
* ``shake-shake`` is Gastaldi 2017, "Shake-Shake-26 2x{width}d": a 16-filter stem, three stages
  of four two-branch blocks (width, 2*width, 4*width filters), per-sample random mixing in
  training (``alpha`` forward, an independent ``beta`` backward), 0.5/0.5 in evaluation, and the
  paper's downsampling shortcut (two shifted average-pool + 1x1-conv paths, concatenated).
  2x32d has 2.9 M parameters, 2x96d 26.2 M.
* ``resnet50`` is exactly torchvision's ``resnet50`` (v1.5: stride on the 3x3 convolution),
  25,557,032 parameters, for 224x224 ImageNet images and 1000 classes.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from gpucast.domain.errors import InvalidSpecError
from gpucast.workloads._options import positive_int, positive_ints, reject_unknown
from gpucast.workloads.base import Batch, Workload

CIFAR_DEPTHS_HINT = "use 15 or 6n+2: 20, 32, 44, 56, 110, ..."


def _classification_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output, target)


def _image_batch_maker(channels: int, resolution: int, num_classes: int) -> Any:
    def make_batch(batch_size: int, device: torch.device) -> Batch:
        images = torch.randn(batch_size, channels, resolution, resolution, device=device)
        labels = torch.randint(0, num_classes, (batch_size,), device=device)
        return (images,), labels

    return make_batch


# ---------------------------------------------------------------------------------------------
# CIFAR ResNets


class _OptionAShortcut(nn.Module):
    """He et al.'s parameter-free shortcut: subsample by the stride, zero-pad the channels."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        self.pad_channels = out_channels - in_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x[:, :, :: self.stride, :: self.stride]
        half = self.pad_channels // 2
        return F.pad(x, (0, 0, 0, 0, half, self.pad_channels - half))


class _BasicBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int, shortcut: str) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut: nn.Module
        if stride == 1 and in_channels == out_channels:
            self.shortcut = nn.Identity()
        elif shortcut == "A":
            self.shortcut = _OptionAShortcut(in_channels, out_channels, stride)
        else:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    """A CIFAR ResNet: stem, three stages of basic blocks, global pooling, linear classifier."""

    def __init__(
        self,
        blocks_per_stage: tuple[int, int, int],
        stem_channels: int,
        stage_channels: tuple[int, int, int],
        shortcut: str,
        num_classes: int,
    ) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, stem_channels, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(stem_channels)
        layers: list[nn.Module] = []
        in_channels = stem_channels
        for stage, (blocks, channels) in enumerate(
            zip(blocks_per_stage, stage_channels, strict=True)
        ):
            for index in range(blocks):
                stride = 2 if stage > 0 and index == 0 else 1
                layers.append(_BasicBlock(in_channels, channels, stride, shortcut))
                in_channels = channels
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(in_channels, num_classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layers(x)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


def cifar_resnet(depth: int, **options: Any) -> Workload:
    """``cifar-resnet{depth}``; options: ``width`` (stem filters, default 16), ``num_classes``;
    ``cifar-resnet15`` also takes ``blocks`` (basic blocks per stage, default ``2,2,2``): the
    CM-DARE ``customN`` models are Res15 with more blocks, e.g. ``blocks=2,3,3`` (custom1)."""
    known = ("width", "num_classes", "blocks") if depth == 15 else ("width", "num_classes")
    reject_unknown(f"cifar-resnet{depth}", options, known)
    width = positive_int("width", options.get("width", 16))
    num_classes = positive_int("num_classes", options.get("num_classes", 10))
    if depth == 15:
        b = positive_ints("blocks", options.get("blocks", (2, 2, 2)), min_len=3)
        if len(b) != 3:
            raise InvalidSpecError("blocks", "must give 3 stages", got=b, fix="e.g. blocks=2,3,3")
        blocks = (b[0], b[1], b[2])
        stages = (2 * width, 4 * width, 8 * width)
        shortcut = "B"
        description = (
            f"T2T resnet_cifar_15: blocks {list(blocks)}, filters {width}/{2 * width}/"
            f"{4 * width}/{8 * width}, projection"
        )
    elif depth >= 8 and (depth - 2) % 6 == 0:
        n = (depth - 2) // 6
        blocks = (n, n, n)
        stages = (width, 2 * width, 4 * width)
        shortcut = "A"
        description = f"He et al. CIFAR ResNet-{depth}: 3 stages of {n} basic blocks, option A"
    else:
        raise InvalidSpecError(
            "cifar-resnet depth", "must be 15 or 6n+2 with n >= 1", got=depth, fix=CIFAR_DEPTHS_HINT
        )

    def build_model(device: torch.device) -> nn.Module:
        with torch.device(device):
            return CifarResNet(blocks, width, stages, shortcut, num_classes)

    return Workload(
        name=f"cifar-resnet{depth}",
        family="vision",
        sample_unit="images",
        build_model=build_model,
        make_batch=_image_batch_maker(3, 32, num_classes),
        loss=_classification_loss,
        description=description,
    )


# ---------------------------------------------------------------------------------------------
# Shake-Shake


class _ShakeMix(torch.autograd.Function):
    """``alpha*a + (1-alpha)*b`` forward, with an independent ``beta`` mixing the gradients."""

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(alpha)
        return alpha * a + (1 - alpha) * b

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        (alpha,) = ctx.saved_tensors
        beta = torch.rand_like(alpha)
        return beta * grad, (1 - beta) * grad, None


class _ShakeBranch(nn.Sequential):
    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__(
            nn.ReLU(),
            nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(),
            nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False),
            nn.BatchNorm2d(out_channels),
        )


class _ShakeShortcut(nn.Module):
    """Gastaldi's downsampling skip: two 1x1-conv paths, the second shifted by one pixel."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        self.conv1 = nn.Conv2d(in_channels, out_channels // 2, 1, bias=False)
        self.conv2 = nn.Conv2d(in_channels, out_channels - out_channels // 2, 1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(x)
        path1 = self.conv1(F.avg_pool2d(x, 1, self.stride))
        shifted = F.pad(x[:, :, 1:, 1:], (0, 1, 0, 1))
        path2 = self.conv2(F.avg_pool2d(shifted, 1, self.stride))
        return self.bn(torch.cat([path1, path2], dim=1))


class _ShakeBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.branch1 = _ShakeBranch(in_channels, out_channels, stride)
        self.branch2 = _ShakeBranch(in_channels, out_channels, stride)
        self.shortcut: nn.Module = (
            nn.Identity()
            if stride == 1 and in_channels == out_channels
            else _ShakeShortcut(in_channels, out_channels, stride)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.branch1(x), self.branch2(x)
        if self.training:
            alpha = torch.rand(x.shape[0], 1, 1, 1, device=x.device, dtype=a.dtype)
            mixed = _ShakeMix.apply(a, b, alpha)
        else:
            mixed = 0.5 * (a + b)
        return self.shortcut(x) + mixed


class ShakeShake(nn.Module):
    """Shake-Shake-(6*blocks+2) 2x{width}d for 32x32 images."""

    def __init__(self, width: int, blocks_per_stage: int, num_classes: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16))
        layers: list[nn.Module] = []
        in_channels = 16
        for stage, channels in enumerate((width, 2 * width, 4 * width)):
            for index in range(blocks_per_stage):
                stride = 2 if stage > 0 and index == 0 else 1
                layers.append(_ShakeBlock(in_channels, channels, stride))
                in_channels = channels
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(in_channels, num_classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.layers(self.stem(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def shake_shake(**options: Any) -> Workload:
    """``shake-shake``: 26 layers, 2 branches; options ``width`` (32/64/96...), ``num_classes``,
    ``blocks`` (per stage, default 4: 26 layers; 5 gives CM-DARE's 32-layer ``shake small 32d``)."""
    reject_unknown("shake-shake", options, ("width", "num_classes", "blocks"))
    width = positive_int("width", options.get("width", 32))
    num_classes = positive_int("num_classes", options.get("num_classes", 10))
    blocks = positive_int("blocks", options.get("blocks", 4))

    def build_model(device: torch.device) -> nn.Module:
        with torch.device(device):
            return ShakeShake(width, blocks, num_classes)

    return Workload(
        name="shake-shake",
        family="vision",
        sample_unit="images",
        build_model=build_model,
        make_batch=_image_batch_maker(3, 32, num_classes),
        loss=_classification_loss,
        description=f"Shake-Shake-{6 * blocks + 2} 2x{width}d (Gastaldi 2017) for CIFAR",
    )


# ---------------------------------------------------------------------------------------------
# ResNet-50 (torchvision's architecture, layer for layer)


class _Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int) -> None:
        super().__init__()
        out_channels = width * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet50(nn.Module):
    """torchvision.models.resnet50 (weights=None), same layers, names and initialisation."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        in_channels = 64
        stages: list[nn.Sequential] = []
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            layer = []
            for index in range(blocks):
                layer.append(_Bottleneck(in_channels, width, stride if index == 0 else 1))
                in_channels = width * _Bottleneck.expansion
            stages.append(nn.Sequential(*layer))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(in_channels, num_classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.constant_(module.weight, 1)
                nn.init.constant_(module.bias, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet50(**options: Any) -> Workload:
    """``resnet50``: 224x224 ImageNet images; option ``num_classes`` (default 1000)."""
    reject_unknown("resnet50", options, ("num_classes",))
    num_classes = positive_int("num_classes", options.get("num_classes", 1000))

    def build_model(device: torch.device) -> nn.Module:
        with torch.device(device):
            return ResNet50(num_classes)

    return Workload(
        name="resnet50",
        family="vision",
        sample_unit="images",
        build_model=build_model,
        make_batch=_image_batch_maker(3, 224, num_classes),
        loss=_classification_loss,
        description="ResNet-50 v1.5 (torchvision architecture), 224x224 ImageNet",
    )
