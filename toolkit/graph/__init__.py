"""Model graphs: builders, presets and the symbolic repeat."""

from toolkit.graph.builders import attention_block, encoder_layer, mlp_block, repeat
from toolkit.graph.ir import DType, Graph, GraphBuilder, OpKind, Role, Rule
from toolkit.graph.presets import PRESETS, Workload, build_graph, get_workload, workloads

__all__ = [
    "PRESETS",
    "DType",
    "Graph",
    "GraphBuilder",
    "OpKind",
    "Role",
    "Rule",
    "Workload",
    "attention_block",
    "build_graph",
    "encoder_layer",
    "get_workload",
    "mlp_block",
    "repeat",
    "workloads",
]
