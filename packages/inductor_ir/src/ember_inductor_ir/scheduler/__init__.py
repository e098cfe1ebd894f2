"""Scheduling: dependencies, dead-code elimination, fusion into kernel groups, buffer reuse."""

from .combine import CombinePolicy, combine_runs
from .kernel_group import Allocation, KernelGroup, Schedule, ScheduledNode
from .schedule import schedule

__all__ = [
    "Allocation",
    "CombinePolicy",
    "KernelGroup",
    "Schedule",
    "ScheduledNode",
    "combine_runs",
    "schedule",
]
