"""Static features of a workload: parameters, FLOPs, bytes per operator class, memory.

``profile_workload(spec, optimizer="sgd", **workload_options)`` returns a
:class:`gpucast.domain.profile.WorkloadProfile`; nothing real is allocated (fake tensors).
"""

from gpucast.profile.profiler import profile, profile_workload

__all__ = ["profile", "profile_workload"]
