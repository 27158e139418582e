"""Built-in PyTorch workloads with synthetic data, user models, and step runners.

``get_workload(name, **options)`` returns a :class:`Workload`; ``steps.make_step`` turns one
into a zero-argument callable running one training or inference step.
"""

from gpucast.workloads.base import Batch, Workload
from gpucast.workloads.registry import (
    canonical_options,
    configuration_name,
    get_workload,
    list_workloads,
    option_example,
)

__all__ = [
    "Batch",
    "Workload",
    "canonical_options",
    "configuration_name",
    "get_workload",
    "list_workloads",
    "option_example",
]
