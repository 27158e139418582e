"""Facts about the Pollux (OSDI 2021) testbed and jobs that both the importer and the models need.

Pollux (Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized Deep
Learning", OSDI 2021) published, per job, step and gradient-sync times against GPU placement
and per-GPU batch, and gradient statistics during training (``pollux_osdi21/`` in the shared
data). Reading them needs the cluster they ran on and each job's reference batch; both are
here with their sources (repository ``petuum/adaptdl``, branch ``osdi21-artifact``).

Gradient statistics (``adaptdl/adaptdl/torch/gradient_noise_scale.py`` and
``adaptdl/adaptdl/torch/parallel.py``): with ``count`` micro-batch gradients per step (replicas
x accumulation steps), ``local_sqr`` the mean of their squared norms and ``total_sqr`` the
squared norm of their mean,

* ``grad_sqr = (count * total_sqr - local_sqr) / (count - 1)`` -- an unbiased estimate of
  ``|G|^2``, the squared norm of the true (full-data) gradient;
* ``grad_var = (local_sqr - total_sqr) * scale / (count - 1)`` with ``scale = B / B0`` (the
  global batch over the job's initial batch ``AdaptiveDataLoader(batch_size=B0)``) -- an
  estimate of ``tr(Sigma) / B0``, the variance of a gradient averaged over ``B0`` samples,
  where ``Sigma`` is the per-sample gradient covariance. It is *not* the per-sample variance.

Both are exponential moving averages over steps (factor ``smoothing ** scale``; smoothing
0.999, 0.997 in the DeepSpeech2 script), read back floored at 0 and 1e-6 (some DeepSpeech2 rows
have ``grad_sqr == 0``). So McCandlish et al.'s (2018) simple noise scale, in samples, is
``B_simple = tr(Sigma) / |G|^2 = B0 * grad_var / grad_sqr``, and Pollux's statistical
efficiency of a batch ``M`` is ``(B_simple + B0) / (B_simple + M)`` (``goodput.py``). The traces'
``progress`` advances by the same amount per row in every ``validation-<B>.csv`` of a job
(one epoch of samples / the smallest ``B``), which shows that ``B0`` is the smallest batch of
the job's traces; it matches the initial batch of each job's script, listed below.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Testbed:
    """A homogeneous GPU cluster a published measurement ran on."""

    nodes: int
    instance_type: str
    gpu: str  # catalog name
    gpus_per_node: int
    vcpus_per_node: int
    memory_gib_per_node: int
    network_gbps: float  # per node, Gbit/s
    region: str
    source: str


#: The 16-node cluster of the Pollux artifact: ``benchmark/main.tf`` starts 16 workers of
#: ``g4dn.12xlarge`` in one placement group (us-west-2b), plus a ``g4dn.2xlarge`` master that
#: runs no jobs. g4dn.12xlarge: 4 x NVIDIA T4, 48 vCPU, 192 GiB, "50 Gigabit" networking (AWS
#: EC2 G4 instance table).
POLLUX_TESTBED = Testbed(
    nodes=16,
    instance_type="g4dn.12xlarge",
    gpu="T4",
    gpus_per_node=4,
    vcpus_per_node=48,
    memory_gib_per_node=192,
    network_gbps=50.0,
    region="us-west-2",
    source=(
        "petuum/adaptdl osdi21-artifact benchmark/main.tf (16 x g4dn.12xlarge workers); "
        "instance shape from the AWS EC2 G4 instance table"
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PolluxJob:
    """One job of the Pollux traces, as its artifact script trains it."""

    job: str
    model: str
    dataset: str
    init_batch_size: int  # B0, the reference batch of grad_var and of progress
    max_batch_size: int
    local_bsz_bounds: tuple[int, int]
    precision: str
    source: str


_BENCH = "petuum/adaptdl osdi21-artifact benchmark/models/"

#: The four jobs in the shared data; ``autoscale_batch_size(max, local_bsz_bounds=...)`` and
#: the initial ``batch_size`` come from each script. None uses autocast or a grad scaler.
POLLUX_JOBS: dict[str, PolluxJob] = {
    "bert": PolluxJob(
        job="bert",
        model="bert-base-uncased (question answering)",
        dataset="SQuAD v1.1, 384-token windows, stride 128",
        init_batch_size=12,
        max_batch_size=384,
        local_bsz_bounds=(4, 12),
        precision="fp32",
        source=_BENCH + "bert/run_squad.py, bert/adaptdljob.yaml",
    ),
    "cifar10": PolluxJob(
        job="cifar10",
        model="ResNet-18",
        dataset="CIFAR-10 (50,000 training images)",
        init_batch_size=128,
        max_batch_size=4096,
        local_bsz_bounds=(32, 1024),
        precision="fp32",
        source=_BENCH + "cifar10/main.py",
    ),
    "deepspeech2": PolluxJob(
        job="deepspeech2",
        model="DeepSpeech2 (5 x 800 bidirectional GRU)",
        dataset="speech manifests shipped with the artifact (data/manifests.tar.gz)",
        init_batch_size=20,
        max_batch_size=640,
        local_bsz_bounds=(10, 80),
        precision="fp32",
        source=_BENCH + "deepspeech2/train.py",
    ),
    "ncf": PolluxJob(
        job="ncf",
        model="NeuMF (NCF)",
        dataset="MovieLens-1M, 4 sampled negatives per positive",
        init_batch_size=256,
        max_batch_size=32768,
        local_bsz_bounds=(32, 32768),
        precision="fp32",
        source=_BENCH + "ncf/main.py",
    ),
}
