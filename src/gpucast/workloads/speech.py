"""Speech recognition, written here: ``deepspeech2``.

``deepspeech2`` is DeepSpeech2 (Amodei et al. 2016) as implemented by SeanNaren's
deepspeech.pytorch (``deepspeech_pytorch/model.py`` with its default ``BiDirectionalConfig``),
the implementation behind the DeepSpeech2 jobs of the Pollux (OSDI'21) and Zeus (NSDI'23)
traces:

* input: a linear spectrogram of 161 frequency bins (16 kHz audio, 20 ms Hamming windows,
  ``n_fft`` 320) and ``seq_len`` frames at a 10 ms stride (default 1,000 frames = 10 s);
* two convolutions: ``Conv2d(1, 32, (41, 11), stride (2, 2), padding (20, 5))`` and
  ``Conv2d(32, 32, (21, 11), stride (2, 1), padding (10, 5))``, each with BatchNorm and
  ``Hardtanh(0, 20)``: 161 bins become 41 (x 32 channels = 1,312 features), time is halved;
* ``layers`` (5) bidirectional LSTM layers of ``hidden`` (1,024) units, the two directions
  summed (not concatenated); every layer but the first starts with a BatchNorm over its input;
* a BatchNorm and a bias-free linear layer to 29 characters (blank, apostrophe, A-Z, space);
* CTC loss over the log-softmax of that output.

At the defaults the model has 86,618,400 parameters, exactly deepspeech.pytorch's
bidirectional model. The synthetic batch has utterances of equal length, so the reference's
padding mask (``MaskConv``) and ``pack_padded_sequence`` would change nothing and are left out.
Each utterance has ``chars`` target characters (default 15 per second of audio, LibriSpeech's
rate: 150 for 10 s).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from gpucast.domain.errors import InvalidSpecError
from gpucast.workloads._options import positive_int, reject_unknown
from gpucast.workloads.base import Batch, Workload

FREQUENCY_BINS = 161  # 16 kHz x 20 ms window / 2 + 1
CHARACTERS = 29  # CTC blank, apostrophe, A-Z, space
CONV_CHANNELS = 32


def _conv_out(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


class _BatchRNN(nn.Module):
    """Optional BatchNorm over the features, a bidirectional LSTM, the directions summed."""

    def __init__(self, input_size: int, hidden: int, batch_norm: bool) -> None:
        super().__init__()
        self.batch_norm = nn.BatchNorm1d(input_size) if batch_norm else None
        self.rnn = nn.LSTM(input_size, hidden, bidirectional=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        steps, batch, features = x.shape
        if self.batch_norm is not None:
            x = self.batch_norm(x.reshape(steps * batch, features)).view(steps, batch, features)
        out, _ = self.rnn(x)
        return out.view(steps, batch, 2, -1).sum(dim=2)


class DeepSpeech2(nn.Module):
    """Spectrogram ``(batch, 1, 161, frames)`` -> log-probabilities ``(steps, batch, 29)``."""

    def __init__(self, *, hidden: int, layers: int) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, CONV_CHANNELS, (41, 11), (2, 2), (20, 5)),
            nn.BatchNorm2d(CONV_CHANNELS),
            nn.Hardtanh(0, 20, inplace=True),
            nn.Conv2d(CONV_CHANNELS, CONV_CHANNELS, (21, 11), (2, 1), (10, 5)),
            nn.BatchNorm2d(CONV_CHANNELS),
            nn.Hardtanh(0, 20, inplace=True),
        )
        bins = _conv_out(_conv_out(FREQUENCY_BINS, 41, 2, 20), 21, 2, 10)
        features = CONV_CHANNELS * bins
        self.rnns = nn.Sequential(
            _BatchRNN(features, hidden, batch_norm=False),
            *(_BatchRNN(hidden, hidden, batch_norm=True) for _ in range(layers - 1)),
        )
        self.fc_norm = nn.BatchNorm1d(hidden)
        self.fc = nn.Linear(hidden, CHARACTERS, bias=False)

    @staticmethod
    def output_steps(frames: int) -> int:
        """Time steps after the convolutions (only the first has a time stride)."""
        return _conv_out(_conv_out(frames, 11, 2, 5), 11, 1, 5)

    def forward(self, spectrogram: torch.Tensor) -> torch.Tensor:
        x = self.conv(spectrogram)
        batch, channels, bins, steps = x.shape
        x = x.reshape(batch, channels * bins, steps).permute(2, 0, 1).contiguous()
        x = self.rnns(x)
        hidden = x.shape[-1]
        logits = self.fc(self.fc_norm(x.reshape(steps * batch, hidden))).view(steps, batch, -1)
        return F.log_softmax(logits, dim=-1)


def deepspeech2(**options: Any) -> Workload:
    """``deepspeech2``; options ``seq_len`` (1,000 spectrogram frames = 10 s), ``hidden``
    (1,024), ``layers`` (5 bidirectional LSTMs), ``chars`` (target characters per utterance,
    default 15 per second)."""
    reject_unknown("deepspeech2", options, ("seq_len", "hidden", "layers", "chars"))
    frames = positive_int("seq_len", options.get("seq_len", 1000))
    hidden = positive_int("hidden", options.get("hidden", 1024))
    layers = positive_int("layers", options.get("layers", 5))
    steps = DeepSpeech2.output_steps(frames)
    chars = positive_int("chars", options.get("chars", max(1, frames * 15 // 100)))
    if chars > steps:
        raise InvalidSpecError(
            "chars",
            f"must be <= {steps}, the output steps of {frames} frames (CTC emits one label "
            "per step)",
            got=chars,
            fix="use fewer characters or a longer --option seq_len",
        )

    def build_model(device: torch.device) -> nn.Module:
        with torch.device(device):
            return DeepSpeech2(hidden=hidden, layers=layers)

    def make_batch(batch_size: int, device: torch.device) -> Batch:
        spectrogram = torch.randn(batch_size, 1, FREQUENCY_BINS, frames, device=device)
        transcripts = torch.randint(1, CHARACTERS, (batch_size, chars), device=device)
        return (spectrogram,), transcripts

    def loss(log_probs: torch.Tensor, transcripts: torch.Tensor) -> torch.Tensor:
        # CTC with ``reduction="mean"`` (per-utterance loss over its length, then the batch
        # mean), spelt out: lengths as Python ints and no reduction inside the op keep every
        # shape static, so that fake tensors can run it (the profiler gives ``aten._ctc_loss``
        # a shape rule).
        batch, length = transcripts.shape
        per_utterance = F.ctc_loss(
            log_probs.float(),
            transcripts,
            (log_probs.shape[0],) * batch,
            (length,) * batch,
            reduction="none",
            zero_infinity=True,
        )
        return (per_utterance / length).mean()

    return Workload(
        name="deepspeech2",
        family="speech",
        sample_unit="utterances",
        build_model=build_model,
        make_batch=make_batch,
        loss=loss,
        description=f"DeepSpeech2 (deepspeech.pytorch), 2 conv + {layers} BiLSTM x {hidden}, "
        f"{frames} frames, CTC over {CHARACTERS} characters",
        options={"seq_len": frames, "hidden": hidden, "layers": layers, "chars": chars},
    )
