"""Node attribution: where each rank ran, hardware events in the hosts' system output, and
which node / GPU to act on (one job: :func:`attribute`; an archive: :class:`NodeSummary`).

Floor: above :mod:`denpex_ml.logs` and :mod:`denpex_ml.taxonomy`, below :mod:`denpex_ml.model`.
Everything here works on pseudonyms; real names appear only through
:mod:`denpex_ml.topology.reveal`, when the owner asks.
"""

from __future__ import annotations

from denpex_ml.topology.kernel import HardwareEvent, fix_is_on_hardware, hardware_events
from denpex_ml.topology.nodes import HostRegistry, NodeSummary
from denpex_ml.topology.parse import RankPlace, Topology, normalise_bus_id, parse_topology
from denpex_ml.topology.suspects import Suspect, attribute, fill_placeholders

__all__ = [
    "HardwareEvent",
    "HostRegistry",
    "NodeSummary",
    "RankPlace",
    "Suspect",
    "Topology",
    "attribute",
    "fill_placeholders",
    "fix_is_on_hardware",
    "hardware_events",
    "normalise_bus_id",
    "parse_topology",
]
