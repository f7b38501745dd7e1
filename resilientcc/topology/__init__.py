"""Topology model: GPUs, NICs, switches, links; builders; failures; JSON IO.

See DESIGN.md §3 and the "Model" page of the docs.
"""

from resilientcc.topology.builders import (
    DEFAULT_NIC_BW,
    DEFAULT_NVLINK_BW,
    DEFAULT_PCIE_BW,
    hierarchical,
    switch_model,
    uniform_switch,
)
from resilientcc.topology.failures import (
    NicScale,
    apply_fail_specs,
    degrade_link,
    fail_nics,
    parse_fail_spec,
    scale_server_nics,
)
from resilientcc.topology.io import (
    atomic_write_text,
    load_topology,
    save_topology,
    topology_from_dict,
    topology_to_dict,
)
from resilientcc.topology.model import GPU, NIC, SWITCH, Link, Node, Topology
from resilientcc.topology.validate import to_networkx, validate

__all__ = [
    "DEFAULT_NIC_BW",
    "DEFAULT_NVLINK_BW",
    "DEFAULT_PCIE_BW",
    "GPU",
    "NIC",
    "SWITCH",
    "Link",
    "NicScale",
    "Node",
    "Topology",
    "apply_fail_specs",
    "atomic_write_text",
    "degrade_link",
    "fail_nics",
    "hierarchical",
    "load_topology",
    "parse_fail_spec",
    "save_topology",
    "scale_server_nics",
    "switch_model",
    "to_networkx",
    "topology_from_dict",
    "topology_to_dict",
    "uniform_switch",
    "validate",
]
