"""The topology layer: builders, failures, JSON round trip, validation errors."""

from __future__ import annotations

import dataclasses
import json
from fractions import Fraction
from pathlib import Path

import pytest

from resilientcc.errors import InputError, TopologyError
from resilientcc.topology import (
    GPU,
    NIC,
    SWITCH,
    Link,
    NicScale,
    Node,
    Topology,
    apply_fail_specs,
    degrade_link,
    fail_nics,
    hierarchical,
    load_topology,
    parse_fail_spec,
    save_topology,
    scale_server_nics,
    switch_model,
    to_networkx,
    topology_from_dict,
    topology_to_dict,
    uniform_switch,
    validate,
)

GB = 10**9


# ------------------------------------------------------------------ builders


def test_hierarchical_rail_shape() -> None:
    t = hierarchical(4, 8)
    assert t.num_ranks == 32
    assert t.servers == (0, 1, 2, 3)
    assert [g.name for g in t.gpus[:2]] == ["s0.gpu0", "s0.gpu1"]
    assert t.gpu(9).name == "s1.gpu1" and t.gpu(9).rank == 9
    assert len(t.nics_of_server[2]) == 8
    kinds = {n.kind for n in t.nodes}
    assert kinds == {GPU, NIC, SWITCH}
    assert {n.name for n in t.nodes if n.kind == SWITCH} == {f"rail{k}" for k in range(8)} | {
        f"s{i}.nvswitch" for i in range(4)
    }
    assert t.server_egress(0) == t.server_ingress(3) == 400 * GB
    assert {lk.kind for lk in t.links} == {"nvlink", "pcie", "network"}
    # NCCL's latency constants: GPU->NIC->rail->NIC->GPU = 14 us, NVLink hop 3.4 us
    lat = {lk.kind: lk.latency for lk in t.links}
    assert 2 * lat["pcie"] + 2 * lat["network"] == Fraction(14, 10**6)
    assert 2 * lat["nvlink"] == Fraction(34, 10**7)
    assert t.param("fabric") == "rail" and t.param("builder") == "hierarchical"
    validate(t)


def test_hierarchical_switch_fabric_and_shared_nics() -> None:
    t = hierarchical(2, 8, nics_per_server=2, nic_bw="200Gbps", fabric="switch")
    assert t.node("fabric").kind == SWITCH
    assert t.server_egress(1) == 2 * 25 * GB
    pcie = {(lk.src, lk.dst) for lk in t.links if lk.kind == "pcie"}
    assert ("s0.gpu3", "s0.nic0") in pcie and ("s0.gpu4", "s0.nic1") in pcie


def test_single_gpu_servers_have_no_nvlink() -> None:
    t = hierarchical(3, 1)
    assert not list(t.iter_links("nvlink"))
    assert t.num_ranks == 3


@pytest.mark.parametrize(
    "kwargs",
    [
        {"servers": 0},
        {"servers": 2, "gpus_per_server": 0},
        {"servers": 2, "nics_per_server": 9},
        {"servers": 2, "fabric": "torus"},
        {"servers": 2, "nic_bw": -1},
        {"servers": 2, "nvlink_bw": "0GB/s"},
        {"servers": 2, "nic_bw": Fraction(10**30)},
        {"servers": 2, "nvlink_bw": "1e-400GB/s"},
        {"servers": 2**14 + 1, "gpus_per_server": 8},
    ],
)
def test_hierarchical_rejects_bad_parameters(kwargs: dict) -> None:
    with pytest.raises(InputError):
        hierarchical(**kwargs)


def test_switch_models() -> None:
    t = switch_model([10, 20], [30, 40])
    assert t.num_ranks == 2
    caps = {(lk.src, lk.dst): lk.capacity for lk in t.links}
    assert caps[("ep1", "switch")] == 20 and caps[("switch", "ep1")] == 40
    u = uniform_switch(3, 100, "1/4")
    assert [lk.capacity for lk in u.links if lk.dst == "switch"] == [25, 100, 100]
    with pytest.raises(TopologyError):
        switch_model([])
    with pytest.raises(TopologyError):
        switch_model([1, 2], [1])
    with pytest.raises(TopologyError):
        uniform_switch(3, 100, 2)


# ------------------------------------------------------------------ failures


def test_fail_nics_reroutes_through_pxn() -> None:
    t = fail_nics(hierarchical(2, 8), 0, 4)
    assert len(t.alive_nics(0)) == 4
    assert t.server_egress(0) == 200 * GB
    assert t.node("s0.nic0").failed
    assert not any("s0.nic0" in (lk.src, lk.dst) for lk in t.links)
    assert t.failures == ("server 0: NICs 0,1,2,3 down",)
    # s0.gpu0 lost its NIC but still reaches the network over NVLink
    g = to_networkx(t)
    import networkx as nx

    assert nx.has_path(g, "s0.gpu0", "s1.gpu0") and nx.has_path(g, "s1.gpu0", "s0.gpu0")
    t2 = fail_nics(t, 0, [5])
    assert len(t2.alive_nics(0)) == 3


@pytest.mark.parametrize(
    "call",
    [
        lambda t: fail_nics(t, 7, 1),
        lambda t: fail_nics(t, 0, 9),
        lambda t: fail_nics(t, 0, [8]),
        lambda t: fail_nics(fail_nics(t, 0, [1]), 0, [1]),
        lambda t: fail_nics(t, 0, 8),  # every NIC of a server down: its GPUs are cut off
        lambda t: degrade_link(t, "s0.gpu0", "rail3", Fraction(1, 2)),
        lambda t: degrade_link(t, "s0.nic0", "rail0", 0),
        lambda t: scale_server_nics(t, 0, 2),
    ],
)
def test_failure_errors(call) -> None:
    with pytest.raises(TopologyError):
        call(hierarchical(2, 8))


def test_degrade_and_scale() -> None:
    t = degrade_link(hierarchical(2, 8), "s0.nic0", "rail0", Fraction(1, 2))
    assert t.server_egress(0) == 375 * GB and t.server_ingress(0) == 375 * GB
    t = degrade_link(hierarchical(2, 8), "s0.nic0", "rail0", "1/2", both_directions=False)
    assert t.server_egress(0) == 375 * GB and t.server_ingress(0) == 400 * GB
    t = scale_server_nics(hierarchical(2, 8), 1, Fraction(1, 4))
    assert t.server_egress(1) == 100 * GB and t.server_egress(0) == 400 * GB


def test_fail_specs() -> None:
    assert parse_fail_spec("0:4") == (0, 4)
    assert parse_fail_spec("2:nic1,nic3") == (2, (1, 3))
    assert parse_fail_spec("1:x0.5") == (1, Fraction(1, 2))
    for bad in ("04", "0:", "a:1", "0:nicX"):
        with pytest.raises(InputError):
            parse_fail_spec(bad)
    t = apply_fail_specs(hierarchical(3, 8), ["0:4", "1:nic0,nic7", "2:x1/2"])
    assert [t.server_egress(s) for s in range(3)] == [200 * GB, 300 * GB, 200 * GB]


def test_fail_spec_scales_some_nics() -> None:
    """``S:nic1x0.5`` scales only NIC 1 of server S, both directions; bad NICs and
    fractions are one-line errors."""
    assert parse_fail_spec("0:nic1,nic5x1/4") == (0, NicScale((1, 5), Fraction(1, 4)))
    t = apply_fail_specs(hierarchical(2, 8), ["0:nic1x1/2", "1:nic2"])
    assert t.server_egress(0) == 375 * GB and t.server_ingress(0) == 375 * GB
    caps = {(lk.src, lk.dst): lk.capacity for lk in t.links if lk.kind == "network"}
    assert caps["s0.nic1", "rail1"] == caps["rail1", "s0.nic1"] == 25 * GB
    assert caps["s0.nic0", "rail0"] == 50 * GB
    for bad, err in (
        ("0:nic1xabc", InputError),
        ("0:nicXx1/2", InputError),
        ("0:nic9x1/2", TopologyError),
        ("0:nic1x2", TopologyError),
        ("1:nic2x1/2", TopologyError),  # failed in the spec before
    ):
        with pytest.raises(err):
            apply_fail_specs(hierarchical(2, 8), ["1:nic2", bad])


# ------------------------------------------------------------------ JSON


def test_json_round_trip(tmp_path: Path) -> None:
    t = degrade_link(
        fail_nics(hierarchical(2, 4, nics_per_server=2), 1, [0]), "s0.nic1", "rail1", "1/3"
    )
    d = topology_to_dict(t)
    assert d["format"] == "resilientcc-topology" and d["version"] == 1
    back = topology_from_dict(json.loads(json.dumps(d)))
    assert back == t and back.fingerprint == t.fingerprint
    p = tmp_path / "t.json"
    save_topology(t, p)
    assert load_topology(p) == t
    # capacities are exact rational strings
    assert all("/" in lk["capacity"] or lk["capacity"].isdigit() for lk in d["links"])


def test_json_reads_units_and_numbers() -> None:
    d = {
        "nodes": [
            {"name": "a", "kind": "gpu", "rank": 0},
            {"name": "b", "kind": "gpu", "rank": 1},
        ],
        "links": [
            {"src": "a", "dst": "b", "capacity": "400Gbps", "latency": "14us"},
            {"src": "b", "dst": "a", "capacity": 5e10, "latency": 0.5},
        ],
    }
    t = topology_from_dict(d)
    assert [lk.capacity for lk in t.links] == [50 * GB, 50 * GB]
    assert t.links[0].latency == Fraction(14, 10**6) and t.links[1].latency == Fraction(1, 2)


def _base() -> dict:
    return topology_to_dict(hierarchical(2, 2))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d: d["links"].append({"src": "s0.gpu0", "dst": "ghost", "capacity": "1"}),
            "dangling",
        ),
        (
            lambda d: d.__setitem__(
                "links", [lk for lk in d["links"] if "s1.gpu1" not in (lk["src"], lk["dst"])]
            ),
            "cut off",
        ),
        (lambda d: d["links"][0].__setitem__("capacity", -3), "positive"),
        (lambda d: d["links"][0].__setitem__("capacity", "1e-400"), "out of range"),
        (lambda d: d["links"][0].__setitem__("capacity", 10**40), "out of range"),
        (lambda d: d["links"][0].__setitem__("latency", "1e400"), "latency"),
        (lambda d: d["links"][0].__setitem__("latency", "soon"), "expected e.g. '14us'"),
        (lambda d: d["links"][0].__setitem__("kind", "wormhole"), "unknown kind 'wormhole'"),
        (lambda d: d["nodes"][0].__setitem__("failed", "yes"), "must be true or false"),
        (lambda d: d["links"][0].__setitem__("capacity", "fast"), "capacity"),
        (lambda d: d["links"][0].pop("capacity"), "capacity"),
        (lambda d: d["nodes"].append(dict(d["nodes"][0])), "duplicate"),
        (lambda d: d["nodes"][0].__setitem__("kind", "router"), "unknown kind"),
        (
            lambda d: next(n for n in d["nodes"] if n["kind"] == "gpu").__setitem__("rank", 17),
            "ranks",
        ),
        (lambda d: d.__setitem__("version", 99), "version"),
        (lambda d: d.__setitem__("nodes", {}), "nodes"),
        (
            lambda d: d["links"].append({"src": "s0.gpu0", "dst": "s0.gpu0", "capacity": "1"}),
            "self-loop",
        ),
    ],
)
def test_validation_errors(mutate, message: str) -> None:
    d = _base()
    mutate(d)
    with pytest.raises(TopologyError, match=message):
        topology_from_dict(d)


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="cannot read"):
        load_topology(tmp_path / "missing.json")
    p = tmp_path / "bad.json"
    p.write_text("[1, 2")
    with pytest.raises(TopologyError, match="not valid JSON"):
        load_topology(p)


def test_validate_direct_constructs() -> None:
    nodes = (Node("a", GPU, rank=0), Node("b", GPU, rank=1))
    ok = Topology(nodes, (Link("a", "b", Fraction(1)), Link("b", "a", Fraction(1))))
    assert validate(ok) is ok
    with pytest.raises(TopologyError, match="no GPUs"):
        validate(Topology((Node("s", SWITCH),), ()))
    with pytest.raises(TopologyError, match="cut off"):
        validate(Topology(nodes, (Link("a", "b", Fraction(1)),)))
    bad = dataclasses.replace(ok, links=(Link("a", "b", Fraction(0)), Link("b", "a", Fraction(1))))
    with pytest.raises(TopologyError, match="capacity"):
        validate(bad)


def test_fail_count_twice_takes_further_nics_down():
    from resilientcc.topology import fail_nics, hierarchical

    t = fail_nics(fail_nics(hierarchical(2, 8), 0, 1), 0, 2)
    assert [n.local for n in t.alive_nics(0)] == [3, 4, 5, 6, 7]
    assert len(t.failures) == 2


def test_atomic_write_names_the_file_and_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    import tempfile

    from resilientcc.errors import InputError
    from resilientcc.topology.io import atomic_write_text, check_writable

    with pytest.raises(InputError, match="no folder"):
        atomic_write_text(tmp_path / "no" / "x.json", "{}")
    with pytest.raises(InputError, match="is a directory"):
        check_writable(tmp_path, "--out")

    def denied(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    with pytest.raises(InputError, match=r"x\.json: cannot write \(Permission denied\)"):
        atomic_write_text(tmp_path / "x.json", "{}")
    monkeypatch.undo()
    monkeypatch.setattr("os.replace", denied)
    with pytest.raises(InputError, match="cannot write"):
        atomic_write_text(tmp_path / "y.json", "{}")
    assert list(tmp_path.iterdir()) == []  # the temporary file is gone too


@pytest.mark.parametrize(("cut", "named"), [(0, "'s0.gpu0' (rank 0)"), (2, "'s2.gpu0' (rank 16)")])
def test_cut_off_names_the_smaller_side(cut: int, named: str) -> None:
    """A server with every NIC down is the side named, whether or not it holds rank 0."""
    with pytest.raises(TopologyError) as err:
        fail_nics(hierarchical(3, 8), cut, 8)
    msg = str(err.value)
    assert f"GPU {named} is cut off" in msg and "8 GPUs are on its side" in msg
