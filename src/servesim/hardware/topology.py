"""Where a deployment's groups sit: NVLink domains and the scale-out network between them.

A GPU's topology (``data/topology.toml``, one entry per measured table, a default for the rest)
says how many GPUs share one NVLink domain and what joins the domains:

* **HGX** (H100, H200, B200, B300 and every GPU without an entry): a node of 8 GPUs on NVSwitch,
  nodes joined by RDMA (one NIC a GPU: the tables' ``internode_bytes_per_s``; 100 GB/s on a B300).
* **NVL72** (GB200, GB300): a rack of 18 compute trays x 4 GPUs, all 72 in one NVLink 5 domain
  (900 GB/s a GPU each way through NVSwitch, the tables' ``nvlink_bytes_per_s``), racks joined by
  InfiniBand (ConnectX-8, 100 GB/s a GPU).  A group of up to 72 GPUs crosses no network.

:meth:`Topology.domains` counts the domains a group of GPUs spans (groups are placed on whole
domains, packed: a group of ``g`` GPUs spans ``ceil(g / domain_gpus)`` of them), and
:meth:`Topology.links` says in words which links it crosses, for the note of every prediction.
Collectives price from this (``servesim.hardware.kernels``: all-reduce; ``moe_kernels``: NCCL
all-gather / reduce-scatter / all-to-all, DeepEP): within a domain from the measured tables
(scaled by the ring traffic beyond the GPU counts measured, never below NCCL's own latency model
for that many ranks), across domains by the hierarchical bound: the domain's time plus the
scale-out share of the traffic at the scale-out rate.

:func:`kv_path` places the KV transfer of a disaggregated deployment: inside one NVL72 rack it rides
NVLink through NVSwitch (a pair on one tray as well), between racks InfiniBand; on HGX nodes the
caller's link.  :func:`rack_dep_sizes` gives a planner the wide-EP sizes inside one domain and,
within a budget of several racks, across them.

Standard library only; the file is read once, on first use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from servesim._catalogfile import read_toml
from servesim._checks import ParameterError, check_int, check_real

__all__ = ["CROSS_RACK_DEP_SIZES", "KINDS", "NVLINK_KV_EFFICIENCY", "RACK_DEP_SIZES", "KVPath", "Topology",
           "kv_link", "kv_path", "links_note", "rack_dep_sizes", "topology_for"]

KINDS: tuple[str, ...] = ("hgx", "nvl72")
"""The topologies servesim places groups on."""

_FILE = Path(__file__).parent / "data" / "topology.toml"


@dataclass(frozen=True)
class Topology:
    """One GPU's NVLink domain and scale-out network (module docstring)."""

    name: str
    """The GPU (its kernel-table name)."""
    kind: str
    """``"hgx"`` or ``"nvl72"``."""
    domain_gpus: int
    """GPUs in one NVLink domain."""
    tray_gpus: int
    """GPUs per compute tray (a node to the OS; equal to ``domain_gpus`` on HGX)."""
    scale_out: str
    """The network between domains, as notes name it (``"RDMA"``, ``"InfiniBand"``)."""
    scale_out_bytes_per_s: float
    """Its rate per GPU, each direction."""
    mnnvl: bool = False
    """One NVLink domain spans trays (multi-node NVLink): TensorRT-LLM's MNNVL all-to-all runs there."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ParameterError("kind", self.kind, f"one of {', '.join(KINDS)}")
        check_int("domain_gpus", self.domain_gpus, lo=1)
        check_int("tray_gpus", self.tray_gpus, lo=1, hi=self.domain_gpus)
        if self.domain_gpus % self.tray_gpus:
            raise ParameterError("tray_gpus", self.tray_gpus, f"a divisor of domain_gpus={self.domain_gpus}")
        check_real("scale_out_bytes_per_s", self.scale_out_bytes_per_s, lo=0.0, lo_open=True)

    @property
    def domain_word(self) -> str:
        """What one domain is called: ``"nodes"`` (HGX) or ``"NVL72 racks"``."""
        return "NVL72 racks" if self.kind == "nvl72" else "nodes"

    def domains(self, gpus: int) -> int:
        """NVLink domains a group of ``gpus`` GPUs spans (packed onto whole domains)."""
        return math.ceil(check_int("gpus", gpus, lo=1) / self.domain_gpus)

    def trays(self, gpus: int) -> int:
        """Compute trays a group of ``gpus`` GPUs spans (packed)."""
        return math.ceil(check_int("gpus", gpus, lo=1) / self.tray_gpus)

    def within(self, gpus: int) -> bool:
        """True when a group of ``gpus`` GPUs stays inside one NVLink domain."""
        return self.domains(gpus) == 1

    def links(self, gpus: int, what: str = "group") -> str:
        """Which links a ``what`` of ``gpus`` GPUs crosses, in words (for a prediction's note)."""
        n = check_int("gpus", gpus, lo=1)
        if n == 1:
            return f"{what} of 1 GPU: no GPU-to-GPU link"
        if self.within(n):
            if self.kind == "nvl72":
                trays = self.trays(n)
                where = (f"{trays} trays of {self.tray_gpus}" if trays > 1 else "one tray")
                return (f"{what} of {n} GPUs: NVLink only, one NVL72 domain ({where}, through NVSwitch)")
            return f"{what} of {n} GPUs: NVLink only, one node of {self.domain_gpus}"
        return (f"{what} of {n} GPUs spans {self.domains(n)} {self.domain_word} of {self.domain_gpus}: "
                f"NVLink within each, {self.scale_out} between them at "
                f"{self.scale_out_bytes_per_s / 1e9:g} GB/s a GPU")


@cache
def _entries() -> dict[str, Any]:
    return read_toml(_FILE)


@cache
def topology_for(name: str, gpus_per_node: int = 8, internode_bytes_per_s: float = 100e9) -> Topology:
    """The topology of the GPU whose kernel table is ``name`` (``data/topology.toml``); a GPU without
    an entry is an HGX node of ``gpus_per_node`` GPUs joined by RDMA at ``internode_bytes_per_s``
    (its tables' system block)."""
    raw = _entries()
    base = dict(raw["default"])
    entry = raw.get("gpu", {}).get(name)
    if entry is None:
        node = int(gpus_per_node)
        return Topology(name, str(base["kind"]), node, node, str(base["scale_out"]),
                        float(internode_bytes_per_s), bool(base["mnnvl"]))
    e = {**base, **entry}
    return Topology(name, str(e["kind"]), int(e["domain_gpus"]), int(e["tray_gpus"]), str(e["scale_out"]),
                    float(e["scale_out_bytes_per_s"]), bool(e["mnnvl"]))


def links_note(topology: Topology, groups: dict[str, int]) -> str:
    """The note line of a deployment whose groups (a label such as ``"TP all-reduce"`` -> its GPUs)
    leave one tray or one NVLink domain: which links each crosses (``""`` when every group stays on
    one tray of an HGX node or NVL72 tray, where only NVLink is involved and nothing needs saying)."""
    parts = []
    for label, gpus in groups.items():
        if gpus > topology.tray_gpus or not topology.within(gpus):
            parts.append(topology.links(gpus, label))
    return "links: " + "; ".join(parts) if parts else ""


NVLINK_KV_EFFICIENCY = 0.89
"""Share of one direction of NVLink a KV transfer reaches: the catalog link ``nvlink``'s
``efficiency`` (400 of 450 GB/s, data/catalog/links.toml)."""


@dataclass(frozen=True)
class KVPath:
    """The link a disaggregated deployment's KV transfer rides, placed on its GPU's topology."""

    name: str
    """``"nvlink"`` (inside one NVLink domain) or the scale-out network, lower case (``"infiniband"``)."""
    bytes_per_s: float
    """The rate one transfer sees."""
    note: str
    """The ``links:`` note that says which links it crosses."""
    within: bool
    """True when every worker of both pools sits in one NVLink domain."""


def kv_path(topology: Topology, nvlink_bytes_per_s: float, gpus: int) -> KVPath | None:
    """The prefill-to-decode KV link of a disaggregated deployment of ``gpus`` GPUs in all, placed
    on a multi-node NVLink domain (NVL72; None elsewhere: an HGX node's pools sit in different
    chassis, the RDMA default of the caller).

    * Every worker of both pools in one rack (``gpus`` <= the domain): GPU to GPU through NVSwitch
      at :data:`NVLINK_KV_EFFICIENCY` x the GPU's NVLink rate ``nvlink_bytes_per_s`` (its kernel
      tables').  A pair on one compute tray takes the same path: an NVL72 tray's GPUs reach each
      other only through the NVSwitch trays (18 NVLinks a GPU, all to the switches), so tray or
      rack makes no difference to the rate, and the note says which it is.
    * The deployment spans racks: the pools are placed rack by rack and a pair in different racks
      moves the KV over the scale-out network, InfiniBand at ``scale_out_bytes_per_s`` a GPU (its
      line rate, as the ``rdma`` link's 50 GB/s is ConnectX-7's); every transfer is priced there,
      an upper bound on the time where some pairs share a rack."""
    n = check_int("gpus", gpus, lo=1)
    if not topology.mnnvl:
        return None
    if topology.within(n):
        nvlink = check_real("nvlink_bytes_per_s", nvlink_bytes_per_s, lo=0.0, lo_open=True)
        rate = NVLINK_KV_EFFICIENCY * nvlink
        trays = topology.trays(n)
        where = ("one tray" if trays == 1 else f"{trays} trays of {topology.tray_gpus}")
        note = (f"links: KV transfer between the pools inside one NVL72 rack ({n} of {topology.domain_gpus} "
                f"GPUs, {where}): NVLink through NVSwitch at {rate / 1e9:.0f} GB/s a GPU "
                f"({NVLINK_KV_EFFICIENCY:g} x {nvlink_bytes_per_s / 1e9:g}; between trays as within one)")
        return KVPath("nvlink", rate, note, True)
    rate = topology.scale_out_bytes_per_s
    note = (f"links: KV transfer between pools in different NVL72 racks ({n} GPUs span "
            f"{topology.domains(n)} racks of {topology.domain_gpus}): {topology.scale_out} at "
            f"{rate / 1e9:g} GB/s a GPU (line rate; priced for every pair, an upper bound where a "
            "pair shares a rack)")
    return KVPath(topology.scale_out.lower(), rate, note, False)


def kv_link(topology: Topology, nvlink_bytes_per_s: float, gpus: int) -> tuple[float, str] | None:
    """:func:`kv_path` where it rides NVLink (every worker of both pools in one NVL72 rack):
    (bytes/s, note); None elsewhere (another rack or an HGX node: the caller's link)."""
    path = kv_path(topology, nvlink_bytes_per_s, gpus)
    return (path.bytes_per_s, path.note) if path is not None and path.within else None


RACK_DEP_SIZES: tuple[int, ...] = (16, 24, 32, 48, 64, 72)
"""Attention-DP x expert-parallel sizes a planner tries inside an NVL72 domain beyond one node's
(DEP16-DEP72: TensorRT-LLM's and SGLang's GB200 wide-EP decode recipes run DEP16, DEP32 and DEP64;
NVIDIA's DeepSeek-R1 GB200 disaggregated recipes in Dynamo use 32-72 GPU decode workers)."""


CROSS_RACK_DEP_SIZES: tuple[int, ...] = (96, 128, 144, 192, 256, 288)
"""DEP sizes beyond one NVL72 domain a planner tries where the budget holds them (twice and four
times the in-domain sizes): their exchange leaves the rack (the hierarchical bound of
``servesim.hardware.moe_kernels``), which is what a plan across racks weighs them by."""


def rack_dep_sizes(topology: Topology, experts: int, budget: int = 0) -> tuple[int, ...]:
    """The DEP sizes of :data:`RACK_DEP_SIZES` that fit one NVLink domain of ``topology`` and divide the
    model's ``experts`` (each rank holds the same number), then those of
    :data:`CROSS_RACK_DEP_SIZES` that span domains and fit a ``budget`` of GPUs (none without one);
    none on an HGX node."""
    if topology.kind != "nvl72":
        return ()
    inside = tuple(g for g in RACK_DEP_SIZES if g <= topology.domain_gpus and experts % g == 0)
    across = tuple(g for g in CROSS_RACK_DEP_SIZES
                   if topology.domain_gpus < g <= budget and experts % g == 0)
    return inside + across
