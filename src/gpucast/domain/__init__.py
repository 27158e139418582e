"""Frozen types, units and errors. Depends on nothing else in gpucast and does no I/O."""
