"""Ember AOT autograd: torch-level FX graphs -> functional aten/prim-level forward and
backward graphs (dispatch-level tracing, functionalization, joint trace, partitioning),
run inside an autograd.Function. See README.md."""

from ember_aot_autograd.api import (
    AotFunction,
    ArtifactStore,
    aot_function,
    aot_module,
    partition_report,
)
from ember_aot_autograd.cse import pure_op
from ember_aot_autograd.errors import (
    AotAutogradError,
    BadArgumentError,
    GraphNotFunctionalError,
    InputMutationError,
    MissingMetadataError,
    UndecomposedOpError,
    UnsupportedOpError,
)
from ember_aot_autograd.graph_checks import assert_functional, assert_has_val
from ember_aot_autograd.graph_source import (
    GraphSource,
    decode_tensor,
    encode_tensor,
    graph_from_source,
    graph_to_source,
)
from ember_aot_autograd.joint import JointGraph, trace_joint
from ember_aot_autograd.partition import (
    Partition,
    PartitionReport,
    default_partition,
    is_recomputable,
    min_cut_rematerialization_partition,
    register_recomputable,
)
from ember_aot_autograd.plan import NotSerializable, RunnerPlan, plan_from_data, plan_to_data
from ember_aot_autograd.runtime import INPUT_WRITES_META, input_writes, plan_runner
from ember_aot_autograd.session import TraceInfo
from ember_aot_autograd.trace import trace_to_aten
from ember_aot_autograd.tracer import FunctionalTracer, TraceReport

__all__ = [
    "INPUT_WRITES_META",
    "AotAutogradError",
    "AotFunction",
    "ArtifactStore",
    "BadArgumentError",
    "FunctionalTracer",
    "GraphNotFunctionalError",
    "GraphSource",
    "InputMutationError",
    "JointGraph",
    "MissingMetadataError",
    "NotSerializable",
    "Partition",
    "PartitionReport",
    "RunnerPlan",
    "TraceInfo",
    "TraceReport",
    "UndecomposedOpError",
    "UnsupportedOpError",
    "aot_function",
    "aot_module",
    "assert_functional",
    "assert_has_val",
    "decode_tensor",
    "default_partition",
    "encode_tensor",
    "graph_from_source",
    "graph_to_source",
    "input_writes",
    "is_recomputable",
    "min_cut_rematerialization_partition",
    "partition_report",
    "plan_from_data",
    "plan_runner",
    "plan_to_data",
    "pure_op",
    "register_recomputable",
    "trace_joint",
    "trace_to_aten",
]
