"""Rendering a scenario's events as the text a launcher or log collector would produce.

The launcher formats are a closed registry (:data:`LAUNCHERS`): a name maps to one
prefix rule. Timestamp styles are a closed set too (:data:`TIMESTAMP_FORMATS`).
Rendering also applies the damage real logs carry: ranks whose output is missing and
truncation (head cut, tail cut, a ``< truncated lines a-b >`` gap, a last line cut off).
Root-cause lines are never removed by truncation, so every incident keeps its evidence.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from denpex_ml.synthetic.scenario import Event, Scenario

__all__ = [
    "FILE_SCHEMES",
    "LAUNCHERS",
    "TIMESTAMP_FORMATS",
    "TRUNCATIONS",
    "Rendered",
    "render",
]

LAUNCHERS = ("torchrun", "torchrun-default", "srun", "mpirun", "pdsh", "ray", "jsonl", "plain", "per-rank-files")
TIMESTAMP_FORMATS = ("none", "iso", "logging", "glog")
TRUNCATIONS = ("none", "head", "tail", "middle", "cut", "excerpt")
FILE_SCHEMES = ("rank{r}.log", "rank_{r}.log", "worker-{r}.log", "job-worker-{r}", "attempt_0/{r}/stderr.log")
_RAY_ACTORS = ("RayTrainWorker", "WorkerDict", "MegatronTrainRayActor", "TrainWorker")


@dataclass(frozen=True, slots=True)
class _Line:
    rank: int | None
    node: int
    text: str
    role: str
    t: float
    first: bool
    stream: str


@dataclass(frozen=True, slots=True)
class Rendered:
    """The rendered incident: ``log`` (one text) or ``logs`` (file name -> text)."""

    log: str | None
    logs: dict[str, str] | None
    details: dict[str, object]


def _expand(events: Iterable[Event], missing: frozenset[int]) -> list[_Line]:
    out: list[_Line] = []
    for ev in sorted(events, key=lambda e: (e.t, e.seq)):
        if ev.rank is not None and ev.rank in missing:
            continue
        for i, part in enumerate(ev.text.split("\n")):
            out.append(_Line(ev.rank, ev.node, part, ev.role, ev.t, i == 0, ev.stream))
    return out


def _protected(lines: list[_Line]) -> list[int]:
    idx = [i for i, ln in enumerate(lines) if ln.role == "root"]
    if idx:
        return idx
    return [i for i, ln in enumerate(lines) if ln.role == "symptom"][:3]


def _truncate(sc: Scenario, lines: list[_Line], kind: str) -> tuple[list[_Line], bool]:
    """Apply one truncation kind; returns the lines and whether anything was removed."""
    rng = sc.rng
    keep = _protected(lines)
    if not lines or kind == "none":
        return lines, False
    first = keep[0] if keep else len(lines) // 2
    last = keep[-1] if keep else len(lines) // 2
    if kind == "head" and first > 4:
        k = rng.randint(first // 3, first - 1)
        return lines[k:], True
    if kind in ("tail", "cut") and len(lines) - last > 4:
        j = rng.randint(last + 2, len(lines) - 1)
        out = lines[:j]
        if kind == "cut" and out and out[-1].role != "root" and len(out[-1].text) > 12:
            ln = out[-1]
            out[-1] = _Line(
                ln.rank, ln.node, ln.text[: rng.randint(6, len(ln.text) - 3)], ln.role, ln.t, ln.first, ln.stream
            )
        return out, True
    if kind == "excerpt":
        # what people paste into an issue: the lines around the error, little else
        keyed = [i for i, ln in enumerate(lines) if ln.role in ("root", "symptom", "context")]
        if keyed:
            a = max(0, keyed[0] - rng.randint(0, 6))
            b = min(len(lines), keyed[-1] + 1 + rng.randint(0, 6))
            window = lines[a:b]
            if len(window) > 80:
                noise = [i for i, ln in enumerate(window) if ln.role == "noise"]
                drop = set(rng.sample(noise, max(0, len(noise) - 10)))
                window = [ln for i, ln in enumerate(window) if i not in drop]
            return window, len(window) < len(lines)
    if kind == "middle":
        bounds = [-1, *keep, len(lines)]
        gaps = [(a + 1, b) for a, b in itertools.pairwise(bounds) if b - a > 12]
        if gaps:
            a, b = rng.choice(gaps)
            i = rng.randint(a + 2, a + (b - a) // 2)
            j = rng.randint(i + 3, b - 1)
            marker = _Line(None, lines[i].node, f"< truncated lines {i + 1}-{j} >", "noise", lines[i].t, True, "stdout")
            return [*lines[:i], marker, *lines[j:]], True
    return lines, False


def _ts(sc: Scenario, fmt: str, ln: _Line) -> str:
    dt = sc.when(ln.t)
    if fmt == "iso":
        return f"{dt:%Y-%m-%dT%H:%M:%S}.{int(ln.t * 1e6) % 10**6:06d}Z "
    if fmt == "logging":
        return f"[{dt:%Y-%m-%d %H:%M:%S},{int(ln.t * 1000) % 1000:03d}] "
    level = "E" if ln.role in ("root", "symptom") else ("W" if ln.stream == "stderr" and ln.role == "noise" else "I")
    return f"{level}{dt:%m%d %H:%M:%S}.{int(ln.t * 1e6) % 10**6:06d} "


def _inner_ts_ok(ln: _Line) -> bool:
    t = ln.text
    return (
        ln.first
        and bool(t)
        and not t[0].isspace()
        and not t.startswith(("Traceback", "[rank", "[E", "[W", "frame #", "{"))
    )


def _line_text(sc: Scenario, ln: _Line, ts_fmt: str) -> str:
    if ts_fmt in ("logging", "glog") and _inner_ts_ok(ln):
        return _ts(sc, ts_fmt, ln) + ln.text
    return ln.text


def _prefixer(sc: Scenario, launcher: str) -> Callable[[_Line], str]:
    if launcher == "torchrun":
        return lambda ln: "" if ln.rank is None or ln.text.startswith(f"[rank{ln.rank}]:") else f"[rank{ln.rank}]:"
    if launcher == "torchrun-default":
        return lambda ln: "" if ln.rank is None else f"[default{ln.rank}]:"
    if launcher == "srun":
        return lambda ln: "" if ln.rank is None else f"{ln.rank}: "
    if launcher == "mpirun":
        return lambda ln: "" if ln.rank is None else f"[1,{ln.rank}]<{ln.stream}>:"
    if launcher == "pdsh":
        by_ip = sc.chance(0.3)
        return lambda ln: f"{sc.ip(ln.node) if by_ip else _host(ln.node)}: "
    if launcher == "ray":
        actor = sc.pick(_RAY_ACTORS)
        return lambda ln: "" if ln.rank is None else f"({actor} pid={sc.pid(ln.rank)}, ip={sc.ip(ln.node)}) "
    return lambda ln: ""


def _host(node: int) -> str:
    from denpex_ml.synthetic.scenario import host_name

    return host_name(node)


def render(sc: Scenario, launcher: str, ts_fmt: str, truncation: str, missing: frozenset[int]) -> Rendered:
    """Render ``sc`` in ``launcher`` format with ``ts_fmt`` timestamps and damage applied."""
    if launcher not in LAUNCHERS:
        raise ValueError(f"launcher: expected one of {LAUNCHERS}, found {launcher!r}")
    if ts_fmt not in TIMESTAMP_FORMATS:
        raise ValueError(f"timestamps: expected one of {TIMESTAMP_FORMATS}, found {ts_fmt!r}")
    lines = _expand(sc.events, missing)
    lines, truncated = _truncate(sc, lines, truncation)
    details: dict[str, object] = {"truncated": truncated, "truncation": truncation if truncated else "none"}
    if launcher == "per-rank-files":
        scheme = sc.pick(FILE_SCHEMES)
        details["file_scheme"] = scheme
        files: dict[str, list[str]] = {}
        node_file: dict[int, str] = {}
        for r in sc.visible:
            if r in missing:
                continue
            node_file.setdefault(sc.node_of(r), scheme.format(r=r))
        for ln in lines:
            if ln.rank is not None:
                name = scheme.format(r=ln.rank)
            elif scheme.startswith("attempt_0"):
                name = "launcher.log"
            else:
                name = node_file.get(ln.node) or scheme.format(r=sc.visible[0])
            text = _line_text(sc, ln, ts_fmt)
            if ts_fmt == "iso":
                text = _ts(sc, ts_fmt, ln) + text
            files.setdefault(name, []).append(text)
        return Rendered(None, {k: "\n".join(v) + "\n" for k, v in sorted(files.items())}, details)
    if launcher == "jsonl":
        out = []
        for ln in lines:
            rec: dict[str, object] = {}
            if ts_fmt != "none":
                rec["time"] = _ts(sc, "iso", ln).strip()
            rec["pod"] = f"job-worker-{ln.node}"
            rec["rank"] = ln.rank
            rec["message"] = _line_text(sc, ln, "none" if ts_fmt == "iso" else ts_fmt)
            out.append(json.dumps(rec, ensure_ascii=False))
        return Rendered("\n".join(out) + "\n", None, details)
    prefix = _prefixer(sc, launcher)
    out = []
    for ln in lines:
        text = prefix(ln) + _line_text(sc, ln, ts_fmt)
        if ts_fmt == "iso":
            text = _ts(sc, ts_fmt, ln) + text
        out.append(text)
    return Rendered("\n".join(out) + "\n", None, details)
