"""Scheduling: dependencies, dead-code elimination, fusion into kernel groups, buffer reuse."""

from .kernel_group import Allocation, KernelGroup, Schedule, ScheduledNode
from .schedule import schedule

__all__ = ["Allocation", "KernelGroup", "Schedule", "ScheduledNode", "schedule"]
