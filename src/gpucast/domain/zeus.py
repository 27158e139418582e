"""Facts about the Zeus (NSDI 2023) workloads and GPUs that both the importer and the models need.

Zeus (You, Chung, Chowdhury, "Zeus: Understanding and Optimizing GPU Energy Consumption of DNN
Training", NSDI 2023) published two traces (``zeus_nsdi23/`` in the shared data): the time and
power of one training epoch per (workload, batch size, GPU power limit), and the epoch at which
each seed reached each validation target. Turning an epoch time into a throughput, or a batch
size into samples to target, needs what the traces do not carry: how many samples one epoch is,
the validation metric and its direction, the target Zeus used, and the precision. They are here,
each with where it comes from.

Sources (repository ``ml-energy/zeus``):

* ``examples/research_reproducibility/zeus_nsdi23/run_alibaba.py``, ``get_job_with_defaults``:
  the optimizer, target metric and maximum epochs of each workload (the values Zeus's
  trace-driven simulator uses).
* ``examples/cifar100/train.py``, ``examples/imagenet/train.py``, ``examples/capriccio/train.py``:
  the public training scripts for three of the six workloads. None uses autocast or a grad
  scaler (fp32). They are examples, not necessarily the scripts that produced the traces: the
  public ImageNet example uses SGD where the trace uses Adadelta.
* The LibriSpeech (DeepSpeech2), MovieLens-1M (NCF) and SQuAD (BERT) scripts are not in the
  artifact, so their epoch sizes and precision are left ``None`` unless other evidence fixes
  them; each entry says which.

``basis`` strings start with ``artifact:`` (read from the artifact's code or data),
``inferred:`` (implied by other evidence, stated) or ``unknown:``.
"""

from __future__ import annotations

from dataclasses import dataclass

_RUN_ALIBABA = "ml-energy/zeus examples/research_reproducibility/zeus_nsdi23/run_alibaba.py"


@dataclass(frozen=True, slots=True, kw_only=True)
class ZeusWorkload:
    """One (dataset, network) pair of the Zeus traces.

    ``train_samples`` is the number of training samples one epoch iterates (``None``: not
    established); ``eval_samples`` the validation set evaluated after each epoch.
    ``target_metric`` and ``max_epochs`` are the defaults of Zeus's own simulator.
    """

    dataset: str
    network: str
    metric: str
    higher_is_better: bool
    target_metric: float
    max_epochs: int
    optimizer: str
    train_samples: int | None
    eval_samples: int | None
    samples_basis: str
    precision: str | None
    precision_basis: str
    target_source: str = _RUN_ALIBABA


#: The six Zeus workloads, keyed by the traces' ``dataset`` column.
ZEUS_WORKLOADS: dict[str, ZeusWorkload] = {
    "cifar100": ZeusWorkload(
        dataset="cifar100",
        network="shufflenetv2",
        metric="top-1 accuracy (fraction)",
        higher_is_better=True,
        target_metric=0.60,
        max_epochs=100,
        optimizer="adadelta",
        train_samples=50_000,
        eval_samples=10_000,
        samples_basis=(
            "artifact: ml-energy/zeus examples/cifar100/train.py trains on torchvision "
            "CIFAR100(train=True) (50,000 images) and validates on train=False (10,000) "
            "every epoch"
        ),
        precision="fp32",
        precision_basis="artifact: examples/cifar100/train.py has no autocast or grad scaler",
    ),
    "imagenet": ZeusWorkload(
        dataset="imagenet",
        network="resnet50",
        metric="top-1 accuracy (fraction)",
        higher_is_better=True,
        target_metric=0.65,
        max_epochs=100,
        optimizer="adadelta",
        train_samples=1_281_167,
        eval_samples=50_000,
        samples_basis=(
            "artifact: ml-energy/zeus examples/imagenet/train.py (ILSVRC2012 ImageFolder; its "
            "--dummy FakeData sizes are 1,281,167 train and 50,000 val images)"
        ),
        precision="fp32",
        precision_basis=(
            "artifact: examples/imagenet/train.py has no autocast; the trace agrees -- at the "
            "top power limit a V100 does 1,281,167 / 3,515 s = 364 images/s at batch 256, an "
            "fp32 rate for ResNet-50"
        ),
    ),
    "librispeech": ZeusWorkload(
        dataset="librispeech",
        network="deepspeech2",
        metric="word error rate (percent; the targets fall 65 -> 35 as training proceeds)",
        higher_is_better=False,
        target_metric=40.0,
        max_epochs=16,
        optimizer="adamw",
        train_samples=None,
        eval_samples=None,
        samples_basis=(
            "unknown: the artifact has no DeepSpeech2 script and does not say which LibriSpeech "
            "training subset was used (all 960 h: 281,241 utterances; train-clean-100: 28,539)"
        ),
        precision=None,
        precision_basis="unknown: no DeepSpeech2 script in the artifact",
    ),
    "movielens-1m": ZeusWorkload(
        dataset="movielens-1m",
        network="ncf",
        metric="NDCG@10 (fraction; inferred: 0.41 is NCF's NDCG@10 level, its HR@10 is ~0.69)",
        higher_is_better=True,
        target_metric=0.41,
        max_epochs=100,
        optimizer="adam",
        train_samples=None,
        eval_samples=None,
        samples_basis=(
            "unknown: NCF trains on the positives plus negatives sampled each epoch, and the "
            "artifact has no NCF script giving the negatives per positive. With the common "
            "leave-one-out split (994,169 training positives) and 4 negatives per positive, as "
            "in Pollux's NCF, an epoch would be 4,970,845 samples -- not confirmed for Zeus"
        ),
        precision=None,
        precision_basis="unknown: no NCF script in the artifact",
    ),
    "squad": ZeusWorkload(
        dataset="squad",
        network="bert_base_uncased",
        metric="F1 (percent; inferred: BERT-base reaches ~88 F1 but ~81 EM on SQuAD v1.1)",
        higher_is_better=True,
        target_metric=84.0,
        max_epochs=6,
        optimizer="adamw",
        train_samples=None,
        eval_samples=None,
        samples_basis=(
            "unknown: no SQuAD script in the artifact. The F1 target of 84 implies SQuAD v1.1 "
            "(87,599 training questions); BERT fine-tuning iterates tokenized 384-token windows, "
            "about 88,600 per epoch (Pollux's BERT trace: 7,387 steps of 12), but Zeus's "
            "sequence length and stride are not published"
        ),
        precision=None,
        precision_basis="unknown: no SQuAD script in the artifact",
    ),
    "sentiment140": ZeusWorkload(
        dataset="sentiment140",
        network="bert_base_uncased",
        metric="accuracy (fraction)",
        higher_is_better=True,
        target_metric=0.84,
        max_epochs=10,
        optimizer="adamw",
        train_samples=None,
        eval_samples=None,
        samples_basis=(
            "unknown: the trace does not say whether BERT trained on all of Sentiment140 "
            "(1,600,000 tweets) or on one Capriccio slice of it (425,000 train + 75,000 val "
            "tweets; examples/research_reproducibility/zeus_nsdi23/capriccio/README.md)"
        ),
        precision="fp32",
        precision_basis=(
            "inferred: examples/capriccio/train.py (the same BERT on slices of Sentiment140) "
            "has no autocast or grad scaler"
        ),
    ),
}

#: ``ZEUS_DATASET_SAMPLES[dataset]``: training samples per epoch, ``None`` where not established
#: (see each :class:`ZeusWorkload`'s ``samples_basis``).
ZEUS_DATASET_SAMPLES: dict[str, int | None] = {
    name: workload.train_samples for name, workload in ZEUS_WORKLOADS.items()
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ZeusGpu:
    """A GPU of the Zeus power traces: the trace's file key, the catalog's row of the traced
    board (its compute and its power facts), the board, and how the board is known."""

    key: str
    catalog_name: str
    board: str
    max_power_limit_w: int
    basis: str


#: ``summary_power_<key>.csv`` -> GPU: the catalog row of each traced board (``basis`` says
#: how the board is known).
ZEUS_GPUS: dict[str, ZeusGpu] = {
    "v100": ZeusGpu(
        key="v100",
        catalog_name="V100-PCIe",
        board="Tesla V100 PCIe 32 GB",
        max_power_limit_w=250,
        basis=(
            "inferred from the trace: the highest power limit is 250 W, the PCIe board's TDP "
            "(SXM2: 300 W), and fp32 ResNet-50 ran at batch 360, beyond 16 GB (the 16 GB P100 "
            "stopped at 128, the 24 GB RTX 6000 at 256). Its compute and power are the "
            "catalog's V100-PCIe row (14 fp32 TFLOPS at 1,380 MHz); until session 20 the "
            "compute was priced on the SXM2 row (V100-32GB, 15.7 TFLOPS), so AWS p3's SXM2 "
            "V100s carried a factor fitted on this PCIe board"
        ),
    ),
    "p100": ZeusGpu(
        key="p100",
        catalog_name="P100",
        board="Tesla P100 PCIe",
        max_power_limit_w=250,
        basis="inferred from the trace: highest power limit 250 W, the PCIe board's TDP",
    ),
    "rtx6000": ZeusGpu(
        key="rtx6000",
        catalog_name="RTX6000",
        board="Quadro RTX 6000 (24 GB)",
        max_power_limit_w=260,
        basis="the trace's file name; highest power limit 260 W, the board's TDP",
    ),
}
