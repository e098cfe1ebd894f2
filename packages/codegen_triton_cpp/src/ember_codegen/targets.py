"""The two code generators' capability records (ember_inductor_ir's ``Target``), declared
beside their op tables (cpp/emit/target.py, triton/target.py) and registered with the loop
IR by device type when ember_codegen is imported: CPU graphs lower for "cpp", CUDA graphs
for "triton"."""

from __future__ import annotations

from ember_codegen.cpp.emit.target import CPP_TARGET
from ember_codegen.triton.target import TRITON_TARGET

#: every target this package registers
TARGETS = (CPP_TARGET, TRITON_TARGET)

__all__ = ["CPP_TARGET", "TARGETS", "TRITON_TARGET"]
