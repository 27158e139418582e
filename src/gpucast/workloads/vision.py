"""Vision models, written here (no torchvision): CIFAR ResNets, Shake-Shake, ImageNet
ResNet-18/50, ShuffleNet V2 and the MLPerf 3D U-Net.

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
* ``cifar-resnet18`` is the ResNet-18 of kuangliu/pytorch-cifar, the CIFAR-10 job of the
  Pollux (OSDI'21) traces: a 3x3 stride-1 stem of 64 filters without max-pool, four stages of
  two basic blocks (64/128/256/512 filters, strides 1/2/2/2) with 1x1-convolution projection
  shortcuts, global average pooling and 10 classes: 11,173,962 parameters.
* ``resnet50`` is exactly torchvision's ``resnet50`` (v1.5: stride on the 3x3 convolution),
  25,557,032 parameters, for 224x224 ImageNet images and 1000 classes; ``resnet18`` exactly
  torchvision's ``resnet18`` (basic blocks 2,2,2,2), 11,689,512 parameters.
* ``shufflenetv2`` is ShuffleNet V2 1.0x (Ma et al. 2018, table 5; the units of figure 3(c, d)
  as in torchvision's ``shufflenet_v2_x1_0``): stages of 4/8/4 units with 116/232/464 channels,
  a 1024-channel 1x1 conv5 and a linear classifier. The default is the CIFAR-100 setting of
  the Zeus (NSDI'23) trace: 32x32 images, 100 classes and the usual CIFAR stem, a 3x3
  *stride-1* convolution of 24 filters with BatchNorm and ReLU and *no* max-pool (stages at
  16, 8 and 4 pixels): 1,356,104 parameters. ``stem=imagenet`` (the default from 128 pixels
  up) is the paper's stride-2 convolution and max-pool; at 224x224 and 1000 classes that is
  torchvision's model, 2,278,604 parameters. The Zeus trace ran weiaicunzai/pytorch-cifar100's
  variant, which differs in small ways we do not copy: biases on every convolution, no ReLU in
  the stem, and a 1x1 convolution keeping the input width at the head of each downsampling
  unit's main branch (1,360,896 parameters, +0.4 %; FLOPs within a few per cent).
* ``unet3d`` is the MLPerf Training 3D U-Net for KiTS19 (mlcommons/training
  ``image_segmentation/pytorch``, ``Unet3D(1, 3, "instancenorm", "relu")``): an input block and
  four strided down blocks (32, 64, 128, 256, 320 filters), a strided 320-filter bottleneck,
  five up blocks (2x2x2 transposed convolution with bias, concatenation with the skip, two
  convolutions), each convolution 3x3x3 without bias followed by an affine InstanceNorm and
  ReLU, and a 1x1x1 output convolution to 3 classes: 31,190,243 parameters. Input: one-channel
  128^3 patches (``patch``); loss: MLPerf's DiceCE (cross-entropy and soft Dice over the two
  foreground classes, averaged).
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from gpucast.domain.errors import InvalidSpecError
from gpucast.workloads._options import positive_int, positive_ints, reject_unknown
from gpucast.workloads.base import Batch, Workload

CIFAR_DEPTHS_HINT = "use 15, 18 or 6n+2: 20, 32, 44, 56, 110, ..."


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
    """A CIFAR ResNet: 3x3 stem, stages of basic blocks, global pooling, linear classifier.

    Every stage after the first halves the resolution in its first block.
    """

    def __init__(
        self,
        blocks_per_stage: tuple[int, ...],
        stem_channels: int,
        stage_channels: tuple[int, ...],
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


def cifar_resnet(depth: int, /, **options: Any) -> Workload:
    """``cifar-resnet{depth}``; options: ``width`` (stem filters, default 16; 64 for depth 18),
    ``num_classes`` (10); ``cifar-resnet15`` also takes ``blocks`` (basic blocks per stage,
    default ``2,2,2``): CM-DARE's ``customN`` models are Res15 with more blocks, e.g.
    ``blocks=2,3,3`` (custom1)."""
    known = ("width", "num_classes", "blocks") if depth == 15 else ("width", "num_classes")
    reject_unknown(f"cifar-resnet{depth}", options, known)
    width = positive_int("width", options.get("width", 64 if depth == 18 else 16))
    num_classes = positive_int("num_classes", options.get("num_classes", 10))
    blocks: tuple[int, ...]
    stages: tuple[int, ...]
    if depth == 15:
        blocks = positive_ints("blocks", options.get("blocks", (2, 2, 2)), min_len=3)
        if len(blocks) != 3:
            raise InvalidSpecError(
                "blocks", "must give 3 stages", got=blocks, fix="e.g. blocks=2,3,3"
            )
        stages = (2 * width, 4 * width, 8 * width)
        shortcut = "B"
        description = (
            f"T2T resnet_cifar_15: blocks {list(blocks)}, filters {width}/{2 * width}/"
            f"{4 * width}/{8 * width}, projection"
        )
    elif depth == 18:
        blocks = (2, 2, 2, 2)
        stages = (width, 2 * width, 4 * width, 8 * width)
        shortcut = "B"
        description = "ResNet-18 for CIFAR (kuangliu/pytorch-cifar): 3x3 stem, no max-pool"
    elif depth >= 8 and (depth - 2) % 6 == 0:
        n = (depth - 2) // 6
        blocks = (n, n, n)
        stages = (width, 2 * width, 4 * width)
        shortcut = "A"
        description = f"He et al. CIFAR ResNet-{depth}: 3 stages of {n} basic blocks, option A"
    else:
        raise InvalidSpecError(
            "cifar-resnet depth",
            "must be 15, 18 or 6n+2 with n >= 1",
            got=depth,
            fix=CIFAR_DEPTHS_HINT,
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
        options={"width": width, "num_classes": num_classes}
        | ({"blocks": blocks} if depth == 15 else {}),
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
        options={"width": width, "num_classes": num_classes, "blocks": blocks},
    )


# ---------------------------------------------------------------------------------------------
# ImageNet ResNet-18 and ResNet-50 (torchvision's architectures, layer for layer)


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


class ImageNetResNet(nn.Module):
    """torchvision's ImageNet ResNets (weights=None): same layers and initialisation.

    ``bottleneck`` selects torchvision's ``Bottleneck`` (v1.5) or ``BasicBlock``; ``blocks`` is
    the number of blocks per stage (ResNet-18: 2,2,2,2; ResNet-50: 3,4,6,3). The basic block
    is :class:`_BasicBlock` with a projection shortcut (torchvision's ``downsample``).
    """

    def __init__(
        self, blocks: tuple[int, int, int, int], *, bottleneck: bool, num_classes: int = 1000
    ) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        in_channels = 64
        stages: list[nn.Sequential] = []
        for index, (width, count) in enumerate(zip((64, 128, 256, 512), blocks, strict=True)):
            layer: list[nn.Module] = []
            for block in range(count):
                stride = 2 if index > 0 and block == 0 else 1
                if bottleneck:
                    layer.append(_Bottleneck(in_channels, width, stride))
                    in_channels = width * _Bottleneck.expansion
                else:
                    layer.append(_BasicBlock(in_channels, width, stride, "B"))
                    in_channels = width
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


def _imagenet_resnet(
    name: str, blocks: tuple[int, int, int, int], bottleneck: bool, /, **options: Any
) -> Workload:
    reject_unknown(name, options, ("num_classes",))
    num_classes = positive_int("num_classes", options.get("num_classes", 1000))

    def build_model(device: torch.device) -> nn.Module:
        with torch.device(device):
            return ImageNetResNet(blocks, bottleneck=bottleneck, num_classes=num_classes)

    block = "bottleneck (v1.5)" if bottleneck else "basic"
    return Workload(
        name=name,
        family="vision",
        sample_unit="images",
        build_model=build_model,
        make_batch=_image_batch_maker(3, 224, num_classes),
        loss=_classification_loss,
        description=f"{name} ({block} blocks, torchvision architecture), 224x224 ImageNet",
        options={"num_classes": num_classes},
    )


def resnet50(**options: Any) -> Workload:
    """``resnet50``: 224x224 ImageNet images; option ``num_classes`` (default 1000)."""
    return _imagenet_resnet("resnet50", (3, 4, 6, 3), True, **options)


def resnet18(**options: Any) -> Workload:
    """``resnet18``: 224x224 ImageNet images; option ``num_classes`` (default 1000)."""
    return _imagenet_resnet("resnet18", (2, 2, 2, 2), False, **options)


# ---------------------------------------------------------------------------------------------
# ShuffleNet V2


def _channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    batch, channels, height, width = x.shape
    x = x.view(batch, groups, channels // groups, height, width).transpose(1, 2)
    return x.reshape(batch, channels, height, width)


class _ShuffleUnit(nn.Module):
    """Ma et al. 2018, figure 3: (c) split, one branch, concat, shuffle; (d) with stride 2."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        half = out_channels // 2
        self.branch1: nn.Module | None = None
        if stride > 1:
            self.branch1 = nn.Sequential(
                nn.Conv2d(in_channels, in_channels, 3, stride, 1, groups=in_channels, bias=False),
                nn.BatchNorm2d(in_channels),
                nn.Conv2d(in_channels, half, 1, bias=False),
                nn.BatchNorm2d(half),
                nn.ReLU(inplace=True),
            )
        self.branch2 = nn.Sequential(
            nn.Conv2d(in_channels if stride > 1 else half, half, 1, bias=False),
            nn.BatchNorm2d(half),
            nn.ReLU(inplace=True),
            nn.Conv2d(half, half, 3, stride, 1, groups=half, bias=False),
            nn.BatchNorm2d(half),
            nn.Conv2d(half, half, 1, bias=False),
            nn.BatchNorm2d(half),
            nn.ReLU(inplace=True),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.branch1 is None:
            kept, processed = x.chunk(2, dim=1)
            out = torch.cat([kept, self.branch2(processed)], dim=1)
        else:
            out = torch.cat([self.branch1(x), self.branch2(x)], dim=1)
        return _channel_shuffle(out, 2)


SHUFFLENET_STEMS = ("cifar", "imagenet")


class ShuffleNetV2(nn.Module):
    """ShuffleNet V2 1.0x: stages of 4, 8, 4 units with 116/232/464 channels, 1024-d conv5."""

    def __init__(self, num_classes: int, stem: str) -> None:
        super().__init__()
        stride = 2 if stem == "imagenet" else 1
        self.conv1 = nn.Sequential(
            nn.Conv2d(3, 24, 3, stride, 1, bias=False), nn.BatchNorm2d(24), nn.ReLU(inplace=True)
        )
        self.maxpool: nn.Module = nn.MaxPool2d(3, 2, 1) if stem == "imagenet" else nn.Identity()
        units: list[nn.Module] = []
        in_channels = 24
        for repeats, channels in ((4, 116), (8, 232), (4, 464)):
            for index in range(repeats):
                units.append(_ShuffleUnit(in_channels, channels, 2 if index == 0 else 1))
                in_channels = channels
        self.stages = nn.Sequential(*units)
        self.conv5 = nn.Sequential(
            nn.Conv2d(in_channels, 1024, 1, bias=False), nn.BatchNorm2d(1024), nn.ReLU(inplace=True)
        )
        self.fc = nn.Linear(1024, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.maxpool(self.conv1(x)))
        return self.fc(self.conv5(x).mean(dim=(2, 3)))


def shufflenetv2(**options: Any) -> Workload:
    """``shufflenetv2`` 1.0x; options ``num_classes`` (100), ``image_size`` (32) and ``stem``
    (``cifar`` below 128 pixels, else ``imagenet``)."""
    reject_unknown("shufflenetv2", options, ("num_classes", "image_size", "stem"))
    num_classes = positive_int("num_classes", options.get("num_classes", 100))
    image_size = positive_int("image_size", options.get("image_size", 32))
    stem = options.get("stem", "cifar" if image_size < 128 else "imagenet")
    if stem not in SHUFFLENET_STEMS:
        raise InvalidSpecError(
            "stem", f"must be one of {', '.join(SHUFFLENET_STEMS)}", got=stem, fix="use cifar"
        )
    smallest = 8 if stem == "cifar" else 32  # three (five) halvings down to a 1x1 map
    if image_size < smallest:
        raise InvalidSpecError(
            "image_size",
            f"must be >= {smallest} with the {stem} stem",
            got=image_size,
            fix=f"use --image-size {smallest} or more",
        )

    def build_model(device: torch.device) -> nn.Module:
        with torch.device(device):
            return ShuffleNetV2(num_classes, stem)

    return Workload(
        name="shufflenetv2",
        family="vision",
        sample_unit="images",
        build_model=build_model,
        make_batch=_image_batch_maker(3, image_size, num_classes),
        loss=_classification_loss,
        description=f"ShuffleNet V2 1.0x, {stem} stem, {image_size}x{image_size}, "
        f"{num_classes} classes",
        options={"num_classes": num_classes, "image_size": image_size, "stem": stem},
    )


# ---------------------------------------------------------------------------------------------
# 3D U-Net (MLPerf Training image segmentation, KiTS19)


def _conv3d_block(in_channels: int, out_channels: int, stride: int) -> nn.Sequential:
    """3x3x3 convolution (no bias: a normalisation follows), InstanceNorm, ReLU."""
    return nn.Sequential(
        nn.Conv3d(in_channels, out_channels, 3, stride, 1, bias=False),
        nn.InstanceNorm3d(out_channels, affine=True),
        nn.ReLU(inplace=True),
    )


class _DownBlock(nn.Sequential):
    """Two convolution blocks; the first has ``stride`` (2 halves every side of the volume)."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__(
            _conv3d_block(in_channels, out_channels, stride),
            _conv3d_block(out_channels, out_channels, 1),
        )


class _UpBlock(nn.Module):
    """2x2x2 transposed convolution (with bias), concatenation with the skip, two conv blocks."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.upsample = nn.ConvTranspose3d(in_channels, out_channels, 2, 2)
        self.convs = _DownBlock(2 * out_channels, out_channels, 1)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return self.convs(torch.cat([self.upsample(x), skip], dim=1))


UNET3D_FILTERS = (32, 64, 128, 256, 320)


class UNet3D(nn.Module):
    """MLPerf's ``Unet3D``: an input block, 4 strided down blocks (32 -> 320 filters), a strided
    320-filter bottleneck, 5 up blocks back to 32 filters, and a 1x1x1 output convolution.

    ``filters`` replaces the five widths (for small test models).
    """

    def __init__(
        self, in_channels: int, num_classes: int, filters: tuple[int, ...] = UNET3D_FILTERS
    ) -> None:
        super().__init__()
        self.input_block = _DownBlock(in_channels, filters[0], 1)
        pairs = list(itertools.pairwise(filters))  # (32, 64), ..., (256, 320)
        self.downsample = nn.ModuleList(_DownBlock(a, b, 2) for a, b in pairs)
        self.bottleneck = _DownBlock(filters[-1], filters[-1], 2)
        ups = [_UpBlock(filters[-1], filters[-1])]
        ups += [_UpBlock(b, a) for a, b in reversed(pairs)]
        self.upsample = nn.ModuleList(ups)
        self.output = nn.Conv3d(filters[0], num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.input_block(x)
        skips = [x]
        for block in self.downsample:
            x = block(x)
            skips.append(x)
        x = self.bottleneck(x)
        for block, skip in zip(self.upsample, reversed(skips), strict=True):
            x = block(x, skip)
        return self.output(x)


def _dice_ce_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """MLPerf's DiceCELoss: mean of cross-entropy and (1 - soft Dice) over the foreground
    classes (background excluded), Dice per sample and class over the volume."""
    cross_entropy = F.cross_entropy(logits, labels)
    probabilities = torch.softmax(logits, dim=1)[:, 1:]
    one_hot = F.one_hot(labels, logits.shape[1]).movedim(-1, 1)[:, 1:].to(probabilities.dtype)
    volume = tuple(range(2, logits.dim()))
    intersection = (probabilities * one_hot).sum(dim=volume)
    total = probabilities.sum(dim=volume) + one_hot.sum(dim=volume)
    dice = (2.0 * intersection + 1e-6) / (total + 1e-6)
    return (cross_entropy + (1.0 - dice).mean()) / 2


def unet3d(**options: Any) -> Workload:
    """``unet3d``; options ``patch`` (128: a 128^3 voxel crop; a multiple of 32, >= 64),
    ``num_classes`` (3: background, kidney, tumour), ``in_channels`` (1, CT), ``width`` (32,
    the first level's filters; the others scale with it: 32/64/128/256/320)."""
    reject_unknown("unet3d", options, ("patch", "num_classes", "in_channels", "width"))
    patch = positive_int("patch", options.get("patch", 128))
    num_classes = positive_int("num_classes", options.get("num_classes", 3))
    in_channels = positive_int("in_channels", options.get("in_channels", 1))
    width = positive_int("width", options.get("width", 32))
    filters = tuple(max(1, f * width // 32) for f in UNET3D_FILTERS)
    if patch % 32 or patch < 64:
        raise InvalidSpecError(
            "patch",
            "must be a multiple of 32 and >= 64 (five halvings leave at least 2^3 voxels, "
            "which instance normalisation needs in training)",
            got=patch,
            fix="e.g. --option patch=128",
        )
    if num_classes < 2:
        raise InvalidSpecError(
            "num_classes", "must be >= 2 (background and foreground)", got=num_classes
        )

    def build_model(device: torch.device) -> nn.Module:
        with torch.device(device):
            return UNet3D(in_channels, num_classes, filters)

    def make_batch(batch_size: int, device: torch.device) -> Batch:
        shape = (batch_size, in_channels, patch, patch, patch)
        volumes = torch.randn(*shape, device=device)
        labels = torch.randint(0, num_classes, (batch_size, patch, patch, patch), device=device)
        return (volumes,), labels

    return Workload(
        name="unet3d",
        family="vision",
        sample_unit="volumes",
        build_model=build_model,
        make_batch=make_batch,
        loss=_dice_ce_loss,
        description=f"3D U-Net (MLPerf KiTS19), filters {'/'.join(map(str, filters))}, "
        f"{patch}^3 patches, {num_classes} classes",
        options={
            "patch": patch,
            "num_classes": num_classes,
            "in_channels": in_channels,
            "width": width,
        },
    )
