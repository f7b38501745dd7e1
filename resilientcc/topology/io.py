"""JSON file format for topologies (versioned, round-trips exactly).

Format (version 1)::

    {
      "format": "resilientcc-topology",
      "version": 1,
      "name": "my cluster",
      "params": {"fabric": "rail"},          # optional
      "failures": ["server 0: NICs 0 down"], # optional, informational
      "nodes": [
        {"name": "s0.gpu0", "kind": "gpu", "server": 0, "local": 0, "rank": 0},
        {"name": "s0.nic0", "kind": "nic", "server": 0, "local": 0},
        {"name": "rail0", "kind": "switch"}
      ],
      "links": [
        {"src": "s0.gpu0", "dst": "s0.nic0", "capacity": "64000000000",
         "latency": "1/1000000", "kind": "pcie"}
      ]
    }

Capacities are bytes/s and latencies seconds; both are written as exact rational
strings, and read from numbers, rational strings or strings with units
(``"400Gbps"``, ``"50GB/s"``, ``"14us"``).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from fractions import Fraction
from pathlib import Path
from typing import IO, Any

from resilientcc.errors import InputError, TopologyError
from resilientcc.topology.model import Link, Node, Topology
from resilientcc.topology.validate import validate
from resilientcc.units import parse_bandwidth, parse_time

__all__ = [
    "FORMAT",
    "VERSION",
    "atomic_file",
    "atomic_write_text",
    "check_writable",
    "load_topology",
    "read_json",
    "read_text",
    "save_topology",
    "topology_from_dict",
    "topology_to_dict",
]

FORMAT = "resilientcc-topology"
VERSION = 1


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike[str], what: str = "", mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temporary file next to ``path`` (``mode`` ``"w"`` UTF-8 text or ``"wb"`` bytes) and
    rename it to ``path`` when the block ends, so a failure leaves nothing half-written.

    ``what`` (e.g. an option name) prefixes the messages of the InputError raised for a
    path that cannot be written.
    """
    p = Path(path)
    check_writable(p, what)

    def cannot(e: OSError) -> InputError:
        where = f"{what}: cannot write {p}" if what else f"{p}: cannot write"
        return InputError(f"{where} ({e.strerror or e})")

    try:
        fd, tmp = tempfile.mkstemp(dir=p.parent if str(p.parent) else ".", prefix=f".{p.name}.")
    except OSError as e:
        raise cannot(e) from None
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as f:
            yield f
        os.replace(tmp, p)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise cannot(e) from None
        raise


def read_text(path: str | os.PathLike[str], error: type[InputError] = InputError) -> str:
    """Read a UTF-8 text file; a file that cannot be read or decoded raises ``error``
    with a one-line message naming it.

    >>> read_text("/nonexistent/x.json")
    Traceback (most recent call last):
    ...
    resilientcc.errors.InputError: /nonexistent/x.json: cannot read (No such file or directory)
    """
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except OSError as e:
        raise error(f"{p}: cannot read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise error(f"{p}: not UTF-8 text (byte {e.start}: {e.reason})") from None


def read_json(path: str | os.PathLike[str], error: type[InputError] = InputError) -> Any:
    """Read a JSON file (:func:`read_text`); invalid JSON raises ``error`` naming the
    file, the line and the column."""
    p = Path(path)
    text = read_text(p, error)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{p}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write a file atomically (:func:`atomic_file`), so a failure leaves nothing half-written."""
    with atomic_file(path) as f:
        f.write(text)


def check_writable(path: str | os.PathLike[str], what: str = "") -> None:
    """Raise InputError if ``path`` cannot be a file to write: a directory, or in a folder
    that does not exist. Cheap, so commands call it before long work; ``what`` (e.g. an
    option name) prefixes the message."""
    p = Path(path)
    lead = f"{what}: " if what else ""
    if p.is_dir():
        raise InputError(f"{lead}{p} is a directory, not a file to write")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{lead}cannot write {p} (no folder {str(parent)!r})")


def _flag(value: object, what: str) -> bool:
    """A JSON boolean; anything else is an error (``"yes"`` is not ``true``)."""
    if not isinstance(value, bool):
        raise TopologyError(f"{what} must be true or false, got {value!r}")
    return value


def topology_to_dict(topo: Topology) -> dict[str, Any]:
    """The JSON-ready dictionary of a topology."""
    nodes = []
    for n in topo.nodes:
        d: dict[str, Any] = {"name": n.name, "kind": n.kind}
        for key in ("server", "local", "rank"):
            v = getattr(n, key)
            if v is not None:
                d[key] = v
        if n.failed:
            d["failed"] = True
        nodes.append(d)
    links = [
        {
            "src": lk.src,
            "dst": lk.dst,
            "capacity": str(lk.capacity),
            "latency": str(lk.latency),
            "kind": lk.kind,
        }
        for lk in topo.links
    ]
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": topo.name,
        "params": dict(topo.params),
        "failures": list(topo.failures),
        "nodes": nodes,
        "links": links,
    }


def _opt_int(d: Mapping[str, Any], key: str, where: str) -> int | None:
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise TopologyError(f"{where}: {key!r} must be an integer, got {v!r}")
    return v


def topology_from_dict(data: Any, where: str = "topology") -> Topology:
    """Build and validate a topology from its dictionary form."""
    if not isinstance(data, dict):
        raise TopologyError(f"{where}: expected a JSON object at the top level")
    if data.get("format", FORMAT) != FORMAT:
        raise TopologyError(f"{where}: 'format' is {data.get('format')!r}, expected {FORMAT!r}")
    version = data.get("version", VERSION)
    if version != VERSION:
        raise TopologyError(
            f"{where}: unsupported version {version!r} (this build reads {VERSION})"
        )
    raw_nodes = data.get("nodes")
    raw_links = data.get("links")
    if not isinstance(raw_nodes, list) or not isinstance(raw_links, list):
        raise TopologyError(f"{where}: needs lists 'nodes' and 'links'")
    nodes = []
    for i, d in enumerate(raw_nodes):
        w = f"{where}: nodes[{i}]"
        if not isinstance(d, dict) or not isinstance(d.get("name"), str) or "kind" not in d:
            raise TopologyError(f"{w}: needs string 'name' and 'kind'")
        nodes.append(
            Node(
                name=d["name"],
                kind=str(d["kind"]),
                server=_opt_int(d, "server", w),
                local=_opt_int(d, "local", w),
                rank=_opt_int(d, "rank", w),
                failed=_flag(d.get("failed", False), f"{w}: 'failed'"),
            )
        )
    links = []
    for i, d in enumerate(raw_links):
        w = f"{where}: links[{i}]"
        if (
            not isinstance(d, dict)
            or not isinstance(d.get("src"), str)
            or not isinstance(d.get("dst"), str)
        ):
            raise TopologyError(f"{w}: needs string 'src' and 'dst'")
        if "capacity" not in d:
            raise TopologyError(f"{w}: missing 'capacity'")
        cap_raw = d["capacity"]
        if isinstance(cap_raw, (int, float)) and not isinstance(cap_raw, bool) and cap_raw <= 0:
            raise TopologyError(f"{w}: capacity must be positive, got {cap_raw!r}")
        try:
            cap = parse_bandwidth(
                cap_raw if not isinstance(cap_raw, float) else repr(cap_raw), f"{w}: capacity"
            )
            lat_raw = d.get("latency", 0)
            lat = parse_time(
                lat_raw if not isinstance(lat_raw, float) else repr(lat_raw), f"{w}: latency"
            )
        except TopologyError:
            raise
        except Exception as e:  # InputError from the unit parsers
            raise TopologyError(str(e)) from None
        links.append(
            Link(d["src"], d["dst"], Fraction(cap), Fraction(lat), str(d.get("kind", "custom")))
        )
    params = data.get("params", {})
    if not isinstance(params, dict):
        raise TopologyError(f"{where}: 'params' must be an object")
    failures = data.get("failures", [])
    if not isinstance(failures, list):
        raise TopologyError(f"{where}: 'failures' must be a list")
    topo = Topology(
        tuple(nodes),
        tuple(links),
        name=str(data.get("name", "custom")),
        params=tuple((str(k), str(v)) for k, v in params.items()),
        failures=tuple(str(f) for f in failures),
    )
    return validate(topo, where)


def load_topology(path: str | os.PathLike[str]) -> Topology:
    """Read and validate a topology JSON file; errors name the file and the offending entry."""
    return topology_from_dict(read_json(path, TopologyError), str(path))


def save_topology(topo: Topology, path: str | os.PathLike[str]) -> None:
    """Write a topology as JSON (atomically)."""
    atomic_write_text(path, json.dumps(topology_to_dict(topo), indent=1) + "\n")
