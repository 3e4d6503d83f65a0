"""The in-memory model of one synthetic incident before it is rendered as text.

A recipe never writes log text directly: it adds :class:`Event` objects to a
:class:`Scenario`. An event is one message (possibly several lines) printed by one rank,
or by a node-level component (launcher agent, kernel, scheduler) when ``rank`` is
``None``, at a time offset in seconds from the start of the job. Rendering (launcher
prefixes, timestamps, truncation, missing ranks) happens later, in
:mod:`denpex_ml.synthetic.launchers`, so every recipe is exercised under every format.

The scenario also owns the masked environment of the job: host names ``node-a``...,
IPs ``10.0.0.N``, process ids, the Python installation paths, the world size and the
subset of ranks whose output is present.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal, TypeVar

__all__ = ["Event", "PyEnv", "Role", "Scenario", "host_name"]

Role = Literal["root", "symptom", "context", "noise", "agent"]
T = TypeVar("T")

_ROLES = frozenset({"root", "symptom", "context", "noise", "agent"})


@dataclass(frozen=True, slots=True)
class Event:
    """One message: ``rank`` None means a node-level line (agent, kernel, scheduler)."""

    t: float
    seq: int
    rank: int | None
    node: int
    text: str
    role: str
    stream: str = "stderr"


@dataclass(frozen=True, slots=True)
class PyEnv:
    """Where Python and its packages live on the (masked) machine."""

    site: str
    python: str
    minor: int
    script: str

    def sp(self, rel: str) -> str:
        """Absolute path of ``rel`` inside site-packages."""
        return f"{self.site}/{rel}"


_OLD_ENVS = (
    ("/opt/conda/lib/python3.8/site-packages", "/opt/conda/bin/python", 8),
    ("/home/user/anaconda3/envs/train/lib/python3.9/site-packages", "/home/user/anaconda3/envs/train/bin/python", 9),
    ("/usr/local/lib/python3.8/dist-packages", "/usr/bin/python3", 8),
    ("/opt/conda/lib/python3.10/site-packages", "/opt/conda/bin/python3.10", 10),
)
_NEW_ENVS = (
    ("/usr/local/lib/python3.10/dist-packages", "/usr/bin/python3", 10),
    ("/opt/conda/lib/python3.11/site-packages", "/opt/conda/bin/python3.11", 11),
    ("/home/user/miniconda3/envs/llm/lib/python3.11/site-packages", "/home/user/miniconda3/envs/llm/bin/python", 11),
    ("/root/.venv/lib/python3.12/site-packages", "/root/.venv/bin/python3", 12),
    ("/usr/local/lib/python3.12/dist-packages", "/usr/bin/python3", 12),
)
_SCRIPTS = (
    "/workspace/train.py",
    "/home/user/project/train.py",
    "/mnt/user/repos/llm-train/scripts/pretrain.py",
    "/workspace/Megatron-LM/pretrain_gpt.py",
    "/app/finetune.py",
    "train.py",
    "/data/user/code/run_sft.py",
)


def host_name(node: int) -> str:
    """Masked host name of node index ``node``: node-a, ..., node-z, node-aa, ..."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    name = ""
    n = node
    while True:
        name = letters[n % 26] + name
        n = n // 26 - 1
        if n < 0:
            return f"node-{name}"


@dataclass
class Scenario:
    """Mutable builder of one incident; recipes add events, the generator renders them.

    Attributes
    ----------
    rng:
        The incident's own random source (seeded from seed, label and index).
    n_ranks:
        World size; only ``visible`` ranks print anything.
    initiator:
        The rank that fails first, or None for scenarios without a single initiator.
    msg_version:
        ``"old"`` (PyTorch <= 2.2 message texts) or ``"new"`` (2.3+ texts).
    backend:
        ``"nccl"`` or ``"gloo"`` (CPU jobs: no watchdog; peers time out in gloo's transport).
    """

    rng: random.Random
    label: str
    n_ranks: int
    initiator: int | None
    msg_version: str
    hard_negative: bool
    gpus_per_node: int
    base_time: datetime
    visible: list[int]
    env: PyEnv
    events: list[Event] = field(default_factory=list)
    variant: str = "default"
    key_lines: list[str] = field(default_factory=list)
    regex_examples: list[str] = field(default_factory=list)
    fail_time: float = 0.0
    launcher: str = "torchrun"
    step_style: str = "plain"
    backend: str = "nccl"
    _seq: int = 0
    _pid_base: int = 0

    # ------------------------------------------------------------------ creation
    @classmethod
    def create(
        cls,
        rng: random.Random,
        label: str,
        *,
        n_ranks: int,
        msg_version: str,
        hard_negative: bool,
        max_visible: int,
    ) -> Scenario:
        """A scenario with a random environment, initiator and visible subset."""
        gpn = 8 if n_ranks >= 8 else n_ranks
        if n_ranks >= 8 and rng.random() < 0.15:
            gpn = 4
        envs = _OLD_ENVS if msg_version == "old" else _NEW_ENVS
        site, python, minor = rng.choice(envs)
        env = PyEnv(site=site, python=python, minor=minor, script=rng.choice(_SCRIPTS))
        initiator = rng.randrange(n_ranks) if rng.random() < 0.8 else rng.randrange(min(n_ranks, 8))
        visible = {initiator, 0}
        if n_ranks <= max_visible:
            visible.update(range(n_ranks))
        else:
            node = initiator // gpn
            visible.update(r for r in range(node * gpn, min(n_ranks, (node + 1) * gpn)))
            visible.update(rng.sample(range(n_ranks), max_visible - min(len(visible), max_visible - 1)))
        year = rng.choice((2022, 2023, 2024, 2025)) if msg_version == "old" else rng.choice((2024, 2025))
        base = datetime(
            year, rng.randint(1, 12), rng.randint(1, 28), rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59)
        )
        return cls(
            rng=rng,
            label=label,
            n_ranks=n_ranks,
            initiator=initiator,
            msg_version=msg_version,
            hard_negative=hard_negative,
            gpus_per_node=gpn,
            base_time=base,
            visible=sorted(visible),
            env=env,
            _pid_base=rng.randint(1200, 3_900_000),
        )

    # ------------------------------------------------------------------ topology
    def node_of(self, rank: int) -> int:
        return rank // self.gpus_per_node

    def local_of(self, rank: int) -> int:
        return rank % self.gpus_per_node

    def host(self, rank: int) -> str:
        return host_name(self.node_of(rank))

    def ip(self, node: int) -> str:
        return f"10.0.0.{node % 250 + 1}"

    def pid(self, rank: int) -> int:
        return self._pid_base + rank * 3 + self.node_of(rank) * 17

    @property
    def old(self) -> bool:
        return self.msg_version == "old"

    @property
    def nodes(self) -> list[int]:
        return sorted({self.node_of(r) for r in self.visible})

    def set_initiator(self, rank: int | None) -> None:
        """Override the initiating rank (recipes with a fixed culprit, or None)."""
        self.initiator = rank
        if rank is not None and rank not in self.visible:
            self.visible = sorted({*self.visible, rank})

    def others(self, limit: int | None = None) -> list[int]:
        """Visible ranks other than the initiator (at most ``limit``, lowest first)."""
        out = [r for r in self.visible if r != self.initiator]
        return out if limit is None else out[:limit]

    def victims(self) -> list[int]:
        """The ranks left waiting: every visible rank except the initiator."""
        return self.others()

    # ------------------------------------------------------------------ randomness
    def pick(self, options: Sequence[T]) -> T:
        return options[self.rng.randrange(len(options))]

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick_variant(self, names: Sequence[str]) -> str:
        """Choose one of a recipe's variants and record it in the incident's meta."""
        self.variant = self.pick(names)
        return self.variant

    def jitter(self, scale: float = 0.5) -> float:
        return self.rng.random() * scale

    def when(self, t: float) -> datetime:
        return self.base_time + timedelta(seconds=t)

    # ------------------------------------------------------------------ events
    def emit(
        self,
        rank: int | None,
        t: float,
        text: str,
        role: str = "noise",
        *,
        node: int | None = None,
        stream: str = "stderr",
    ) -> None:
        """Add one message; ``rank`` None with ``node`` for node-level lines."""
        if role not in _ROLES:
            raise ValueError(f"role: expected one of {sorted(_ROLES)}, found {role!r}")
        if rank is not None:
            if rank not in self.visible:
                return
            node = self.node_of(rank)
        elif node is None:
            node = 0
        self._seq += 1
        self.events.append(Event(t=t, seq=self._seq, rank=rank, node=node, text=text, role=role, stream=stream))
        if role == "root" and len(self.key_lines) < 6:
            lines = [ln for ln in text.split("\n") if ln.strip()]
            salient = [ln for ln in lines if not ln[0].isspace() and not ln.startswith("Traceback")]
            first = (salient or lines or [""])[0].strip()
            if first and first not in self.key_lines:
                self.key_lines.append(first)

    def root(self, rank: int | None, t: float, text: str, *, node: int | None = None) -> None:
        self.emit(rank, t, text, "root", node=node)

    def symptom(self, rank: int | None, t: float, text: str, *, node: int | None = None) -> None:
        self.emit(rank, t, text, "symptom", node=node)

    def context(
        self, rank: int | None, t: float, text: str, *, node: int | None = None, stream: str = "stdout"
    ) -> None:
        self.emit(rank, t, text, "context", node=node, stream=stream)

    def noise(self, rank: int | None, t: float, text: str, *, node: int | None = None, stream: str = "stdout") -> None:
        self.emit(rank, t, text, "noise", node=node, stream=stream)

    def agent(self, node: int, t: float, text: str, role: str = "agent") -> None:
        self.emit(None, t, text, role, node=node)
