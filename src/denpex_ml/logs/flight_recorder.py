"""PyTorch Flight Recorder dumps, read without running anything they contain.

The Flight Recorder keeps the last ``TORCH_FR_BUFFER_SIZE`` (older name
``TORCH_NCCL_TRACE_BUFFER_SIZE``) collectives of every process group of a rank and dumps
them, on a timeout or when asked, to ``TORCH_FR_DUMP_TEMP_FILE<rank>`` (older
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE<rank>``; NCCL builds default to ``/tmp/nccl_trace_rank_<rank>``)
as a pickle, or as JSON through ``torch._C._distributed_c10d._dump_fr_trace_json()``.

A pickle from a file someone hands us may name any Python callable and run it when loaded.
The dump is made of dicts, lists, tuples, strings, numbers, booleans and ``None`` only, which
the pickle protocol builds without naming a single global, so :class:`_ContainersOnly`
refuses *every* global and every persistent id: a hostile payload fails before any of its
code is reached (and its memo is a dict: no memory bomb through memo indices). The decoded
tree is then read field by field into typed frozen dataclasses, with a node budget
proportional to the input size (a pickle can share one list many times, which would
otherwise let a few bytes describe an exponentially large tree).

What torch 2.13 writes (``version`` ``"2.10"``)::

    {"version": "2.10", "pg_config": {name: {"name", "desc", "ranks": "[0, 1]"}},
     "pg_status": {pg_id: {"last_enqueued_collective", "last_started_collective",
                           "last_completed_collective"}},
     "comm_lib_version": "", "nccl_comm_state": {...} (JSON only),
     "entries": [{"record_id", "pg_id", "process_group": (name, desc), "collective_seq_id",
                  "p2p_seq_id", "op_id", "profiling_name": "gloo:all_reduce", "time_created_ns",
                  "input_sizes", "input_dtypes", "output_sizes", "output_dtypes",
                  "state": "scheduled" | "started" | "completed", "retired",
                  "time_discovered_started_ns", "time_discovered_completed_ns", "timeout_ms",
                  "is_p2p", "thread_id", "thread_name",
                  "frames": [{"name", "filename", "line"}] (pickle only, innermost first)}]}

The dump names no rank: it is taken from a ``rank`` key where a version has one, else from
the trailing number of the file name (``fr_trace_rank_3``, ``nccl_trace_rank_3.json``).
"""

from __future__ import annotations

import io
import json
import pickle
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, NamedTuple, NoReturn

from denpex_ml.errors import FlightRecorderError

__all__ = [
    "FREntry",
    "FRFrame",
    "FRGroupConfig",
    "FRGroupStatus",
    "FlightRecorderDump",
    "looks_like_flight_recorder",
    "rank_from_name",
    "read_flight_recorder",
]

DEFAULT_MAX_BYTES = 64 * 1024**2
DEFAULT_MAX_ENTRIES = 100_000
_MAX_TEXT = 1024  # longer strings (file names, descriptions) are cut to this many characters
_HEAD_BYTES = 8192
_NAME_PATTERN = re.compile(r"(?:^|[/\\])(?:fr_trace|nccl_trace|flight_recorder|fr_dump)[^/\\]*$", re.IGNORECASE)
_TRAILING_NUMBER = re.compile(r"(\d+)$")
_NAME_SUFFIXES = (".json", ".pkl", ".pickle", ".pt", ".bin", ".dump")


class FRFrame(NamedTuple):
    """One Python stack frame recorded with an entry (``frames`` are innermost first)."""

    name: str
    filename: str
    line: int


@dataclass(frozen=True)
class FREntry:
    """One recorded collective or point-to-point operation of one rank.

    Attributes
    ----------
    record_id:
        Position of the record in the rank's ring buffer (grows over the whole run).
    pg_id:
        The rank-local id of the process group (``-1`` when absent).
    pg_name, pg_desc:
        The process group's name (the same on every rank) and description (``default_pg``...).
    collective_seq_id, p2p_seq_id:
        Order of the collective (point-to-point operation) within its process group.
    op:
        The operation without backend prefix and peer suffix: ``all_reduce``, ``send``...
    backend:
        The prefix of ``profiling_name``: ``nccl``, ``gloo``... (empty when there is none).
    profiling_name:
        The name as recorded, e.g. ``nccl:send 0->1``.
    input_sizes, output_sizes, input_dtypes, output_dtypes:
        Tensor shapes and dtype names, one per tensor.
    state:
        ``scheduled``, ``started`` or ``completed`` as the recorder last saw it (gloo leaves
        every entry ``scheduled``; see :attr:`completed`).
    retired:
        The work object finished (completed or failed) before the dump was taken.
    is_p2p:
        A send/recv rather than a collective.
    time_created_ns, time_started_ns, time_completed_ns:
        Wall-clock nanoseconds; the last two are ``None`` when not discovered.
    timeout_ms:
        The process group timeout in force (``None`` when absent).
    frames:
        Python stack of the call, innermost first (absent from JSON dumps).
    """

    record_id: int
    pg_id: int
    pg_name: str
    pg_desc: str
    collective_seq_id: int
    p2p_seq_id: int
    op: str
    backend: str
    profiling_name: str
    input_sizes: tuple[tuple[int, ...], ...]
    output_sizes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    output_dtypes: tuple[str, ...]
    state: str
    retired: bool
    is_p2p: bool
    time_created_ns: int
    time_started_ns: int | None
    time_completed_ns: int | None
    timeout_ms: int | None
    frames: tuple[FRFrame, ...]

    @property
    def completed(self) -> bool:
        """Whether the operation finished: ``state == "completed"`` or the work was retired.

        NCCL moves ``state`` to ``completed``; gloo never updates it, but retires the work
        once it has finished (also when it failed).
        """
        return self.state == "completed" or self.retired


@dataclass(frozen=True)
class FRGroupConfig:
    """A process group as listed in ``pg_config``: name, description and member ranks."""

    name: str
    desc: str
    ranks: tuple[int, ...] | None


@dataclass(frozen=True)
class FRGroupStatus:
    """``pg_status`` of one process group: last sequence ids enqueued, started and completed (-1: none)."""

    pg_id: str
    last_enqueued: int | None
    last_started: int | None
    last_completed: int | None


@dataclass(frozen=True)
class FlightRecorderDump:
    """The Flight Recorder dump of one rank.

    Attributes
    ----------
    rank:
        The global rank that wrote it (``None`` when neither the dump nor its name says).
    version:
        The dump format version (``"2.10"`` for torch 2.13).
    pg_config:
        The process groups the rank knew, in the dump's order.
    pg_status:
        Per process group, the last sequence ids enqueued, started and completed.
    entries:
        The recorded operations, oldest first.
    source:
        Where the dump came from (a path or archive member name), used in messages.
    format:
        ``pickle`` or ``json``.
    """

    rank: int | None
    version: str
    pg_config: tuple[FRGroupConfig, ...]
    pg_status: tuple[FRGroupStatus, ...]
    entries: tuple[FREntry, ...]
    source: str
    format: str


class _ContainersOnly(pickle._Unpickler):
    """An unpickler that builds only dicts, lists, tuples, sets, strings, bytes and numbers.

    Every other object needs a global (a class or a function) in the pickle stream, which
    :meth:`find_class` refuses before it is imported; persistent ids are refused too.

    It extends the pure-Python unpickler (``pickle._Unpickler``, the reference
    implementation behind :class:`pickle.Unpickler`), not the C one: the C unpickler
    keeps its memo in an array sized by the largest index the stream names, so the eight
    bytes ``\\x80\\x02}r\\xff\\xff\\xff\\xff`` would make it allocate and clear 64 GiB
    (CPython before 3.14). The Python one keeps a dict. It is about five times slower,
    a few seconds for the largest dump accepted.
    """

    def __init__(self, data: bytes, source: str) -> None:
        super().__init__(io.BytesIO(data))
        self._source = source

    def find_class(self, module: str, name: str) -> NoReturn:
        raise FlightRecorderError(
            f"{self._source}: the pickle names the Python object {module[:80]}.{name[:80]}; a Flight Recorder dump "
            "holds only plain containers, so it was refused without being loaded"
        )

    def persistent_load(self, pid: Any) -> NoReturn:
        raise FlightRecorderError(
            f"{self._source}: the pickle uses persistent ids; a Flight Recorder dump has none, so it was refused"
        )


def looks_like_flight_recorder(head: bytes, name: str) -> bool:
    """Whether a file looks like a Flight Recorder dump, from its first bytes and its name.

    Parameters
    ----------
    head:
        The first bytes of the file (a few KiB; more than 8 KiB is not looked at).
    name:
        Its name or path (``fr_trace_*``, ``nccl_trace_rank_*`` are the usual names).

    Returns
    -------
    bool
        True for a pickle (protocol 2+) or JSON object naming ``entries`` or ``pg_config`` near
        its start, or a pickle/JSON object with a Flight Recorder file name.

    Examples
    --------
    >>> looks_like_flight_recorder(b'\\x80\\x02}q\\x00(X\\x07\\x00\\x00\\x00versionq\\x01X\\x04\\x00\\x00\\x002.10'
    ...                            b'X\\t\\x00\\x00\\x00pg_config', "dump")
    True
    >>> looks_like_flight_recorder(b"[rank0]: NCCL WARN timeout", "rank0.log")
    False
    """
    head = head[:_HEAD_BYTES]
    named = bool(_NAME_PATTERN.search(name))
    if head.startswith(b"\x80") and len(head) > 1 and 2 <= head[1] <= 5:
        return named or b"entries" in head or b"pg_config" in head
    text = head.lstrip()
    if text.startswith(b"{"):
        keys = (b'"entries"', b'"pg_config"', b'"pg_status"', b'"profiling_name"')
        return named or ((b'"entries"' in text or b'"pg_config"' in text) and sum(k in text for k in keys) >= 2)
    return False


def rank_from_name(name: str) -> int | None:
    """The trailing number of a file name (``fr_trace_rank_3.json`` -> 3), or ``None``.

    Examples
    --------
    >>> rank_from_name("dumps/nccl_trace_rank_12")
    12
    >>> rank_from_name("fr_trace_rank_3.json")
    3
    >>> rank_from_name("trace") is None
    True
    """
    base = PurePath(name.replace("\\", "/")).name
    lowered = base.lower()
    for suffix in _NAME_SUFFIXES:
        if lowered.endswith(suffix):
            base = base[: -len(suffix)]
            break
    match = _TRAILING_NUMBER.search(base)
    return int(match.group(1)) if match else None


def read_flight_recorder(
    data: bytes,
    *,
    source: str,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_entries: int = DEFAULT_MAX_ENTRIES,
    rank: int | None = None,
) -> FlightRecorderDump:
    """Read one rank's Flight Recorder dump (pickle or JSON) without executing anything in it.

    Parameters
    ----------
    data:
        The whole file.
    source:
        Its path or archive member name: named in error messages, and the rank is taken from
        its trailing number when the dump has no ``rank`` key.
    max_bytes:
        Larger inputs are refused.
    max_entries:
        Dumps with more entries are refused.
    rank:
        The rank, when the caller knows it better than the dump or the name.

    Returns
    -------
    FlightRecorderDump

    Raises
    ------
    FlightRecorderError
        The input is too large, neither a pickle nor JSON, corrupt or truncated, names a
        Python object (code), is not a dict with ``version`` and ``entries``, or a field has
        the wrong type.

    Examples
    --------
    >>> dump = read_flight_recorder(
    ...     b'{"version": "2.10", "entries": [{"profiling_name": "gloo:all_reduce", "collective_seq_id": 1,'
    ...     b' "process_group": ["0", "default_pg"], "input_sizes": [[4]]}]}',
    ...     source="fr_trace_rank_2.json",
    ... )
    >>> dump.rank, dump.entries[0].op, dump.entries[0].input_sizes
    (2, 'all_reduce', ((4,),))
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise FlightRecorderError(f"{source}: expected the dump as bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) > max_bytes:
        raise FlightRecorderError(
            f"{source}: {len(data)} bytes is more than the {max_bytes} accepted for a Flight Recorder dump"
        )
    if data.startswith(b"\x80"):
        fmt, tree = "pickle", _load_pickle(data, source)
    elif data.lstrip().startswith(b"{"):
        fmt, tree = "json", _load_json(data, source)
    else:
        shown = data[:16]
        raise FlightRecorderError(
            f"{source}: not a Flight Recorder dump (expected a pickle starting with b'\\x80' or a JSON object, "
            f"got {shown!r})"
        )
    reader = _TreeReader(source, budget=4 * len(data) + 100_000)
    return reader.dump(tree, fmt, max_entries, rank)


def _load_pickle(data: bytes, source: str) -> Any:
    try:
        return _ContainersOnly(data, source).load()
    except FlightRecorderError:
        raise
    except RecursionError:
        raise FlightRecorderError(f"{source}: the pickle is nested too deeply") from None
    except MemoryError:
        raise FlightRecorderError(f"{source}: the pickle needs more memory than is available") from None
    except Exception as exc:  # corrupt input makes the unpickler raise nearly anything
        raise FlightRecorderError(
            f"{source}: corrupt or truncated pickle ({type(exc).__name__}: {str(exc)[:200]})"
        ) from None


def _load_json(data: bytes, source: str) -> Any:
    try:
        return json.loads(data)
    except RecursionError:
        raise FlightRecorderError(f"{source}: the JSON is nested too deeply") from None
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
        raise FlightRecorderError(f"{source}: invalid JSON ({str(exc)[:200]})") from None


class _TreeReader:
    """Reads the decoded tree into dataclasses, checking types and charging a node budget."""

    def __init__(self, source: str, budget: int) -> None:
        self.source = source
        self.budget = budget
        self._cut: dict[int, str] = {}
        self._frames: dict[tuple[str, str, int], FRFrame] = {}

    def fail(self, where: str, message: str) -> NoReturn:
        raise FlightRecorderError(f"{self.source}: {where}: {message}")

    def charge(self, n: int, where: str) -> None:
        self.budget -= n
        if self.budget < 0:
            self.fail(where, "the dump describes far more values than its size allows (shared references?); refused")

    def dump(self, tree: Any, fmt: str, max_entries: int, rank: int | None) -> FlightRecorderDump:
        if not isinstance(tree, dict):
            self.fail("top level", f"expected a dict, got {type(tree).__name__}")
        for key in ("version", "entries"):
            if key not in tree:
                present = ", ".join(sorted(str(k)[:40] for k in list(tree)[:20]))
                self.fail("top level", f"missing key {key!r} (keys present: {present or 'none'})")
        version = tree["version"]
        if not isinstance(version, (str, int, float)) or isinstance(version, bool):
            self.fail("version", f"expected a string, got {type(version).__name__}")
        entries = tree["entries"]
        if not isinstance(entries, list):
            self.fail("entries", f"expected a list, got {type(entries).__name__}")
        if len(entries) > max_entries:
            self.fail("entries", f"{len(entries)} entries is more than the {max_entries} accepted")
        if rank is None:
            rank = self.optional_int(tree, "rank", "top level")
        if rank is None:
            rank = rank_from_name(self.source)
        return FlightRecorderDump(
            rank=rank,
            version=self.text(str(version)),
            pg_config=self.pg_config(tree.get("pg_config")),
            pg_status=self.pg_status(tree.get("pg_status")),
            entries=tuple(self.entry(e, i) for i, e in enumerate(entries)),
            source=self.source,
            format=fmt,
        )

    # -- scalars -------------------------------------------------------------------------

    def text(self, value: str) -> str:
        if len(value) <= _MAX_TEXT:
            return value
        key = id(value)  # a shared long string is cut once, not once per reference
        if key not in self._cut:
            self._cut[key] = value[:_MAX_TEXT] + "..."
        return self._cut[key]

    def optional_int(self, obj: Mapping[Any, Any], key: str, where: str) -> int | None:
        value = obj.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            self.fail(where, f"field {key!r}: expected an integer, got {type(value).__name__}")
        if isinstance(value, str):  # JSON dumps write pg_status numbers as strings
            try:
                return int(value.strip())
            except ValueError:
                self.fail(where, f"field {key!r}: expected an integer, got {value[:40]!r}")
        return value

    def int_field(self, obj: Mapping[Any, Any], key: str, where: str, default: int) -> int:
        value = self.optional_int(obj, key, where)
        return default if value is None else value

    def str_field(self, obj: Mapping[Any, Any], key: str, where: str, default: str = "") -> str:
        value = obj.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            self.fail(where, f"field {key!r}: expected a string, got {type(value).__name__}")
        return self.text(value)

    def bool_field(self, obj: Mapping[Any, Any], key: str, where: str) -> bool:
        value = obj.get(key)
        if value is None:
            return False
        if not isinstance(value, bool):
            self.fail(where, f"field {key!r}: expected true/false, got {type(value).__name__}")
        return value

    # -- containers ----------------------------------------------------------------------

    def sizes(self, obj: Mapping[Any, Any], key: str, where: str) -> tuple[tuple[int, ...], ...]:
        value = obj.get(key)
        if value is None:
            return ()
        if not isinstance(value, (list, tuple)):
            self.fail(where, f"field {key!r}: expected a list of shapes, got {type(value).__name__}")
        self.charge(len(value) + 1, where)
        shapes: list[tuple[int, ...]] = []
        for shape in value:
            if not isinstance(shape, (list, tuple)):
                self.fail(where, f"field {key!r}: expected a shape (list of integers), got {type(shape).__name__}")
            self.charge(len(shape), where)
            if not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
                self.fail(where, f"field {key!r}: a shape holds something other than integers")
            shapes.append(tuple(shape))
        return tuple(shapes)

    def strings(self, obj: Mapping[Any, Any], key: str, where: str) -> tuple[str, ...]:
        value = obj.get(key)
        if value is None:
            return ()
        if not isinstance(value, (list, tuple)):
            self.fail(where, f"field {key!r}: expected a list of strings, got {type(value).__name__}")
        self.charge(len(value) + 1, where)
        if not all(isinstance(s, str) for s in value):
            self.fail(where, f"field {key!r}: expected a list of strings")
        return tuple(self.text(s) for s in value)

    def frames(self, obj: Mapping[Any, Any], where: str) -> tuple[FRFrame, ...]:
        value = obj.get("frames")
        if value is None:
            return ()
        if not isinstance(value, (list, tuple)):
            self.fail(where, f"field 'frames': expected a list, got {type(value).__name__}")
        self.charge(4 * len(value) + 1, where)
        out: list[FRFrame] = []
        known = self._frames  # the same few frames recur in every entry: build each once
        for frame in value:
            if not isinstance(frame, dict):
                self.fail(where, f"field 'frames': expected a dict per frame, got {type(frame).__name__}")
            name, filename, line = frame.get("name"), frame.get("filename"), frame.get("line")
            if type(name) is str and type(filename) is str and type(line) is int:  # the usual case, fast
                key = (name, filename, line)
                cached = known.get(key)
                if cached is None:
                    cached = known[key] = FRFrame(self.text(name), self.text(filename), line)
                out.append(cached)
            else:
                out.append(
                    FRFrame(
                        self.str_field(frame, "name", where),
                        self.str_field(frame, "filename", where),
                        self.int_field(frame, "line", where, 0),
                    )
                )
        return tuple(out)

    def entry(self, raw: Any, index: int) -> FREntry:
        where = f"entry {index}"
        if not isinstance(raw, dict):
            self.fail(where, f"expected a dict, got {type(raw).__name__}")
        self.charge(len(raw) + 1, where)
        if "profiling_name" not in raw:
            self.fail(where, "missing field 'profiling_name'")
        seq_key = "collective_seq_id" if "collective_seq_id" in raw else "seq_id"  # "seq_id" before version 2
        if seq_key not in raw:
            self.fail(where, "missing field 'collective_seq_id'")
        profiling_name = self.str_field(raw, "profiling_name", where)
        backend, _, rest = profiling_name.rpartition(":")  # "nccl:send 0->1" -> "nccl", "send"
        op = rest.strip().split(" ", 1)[0]
        pg_id = self.int_field(raw, "pg_id", where, -1)
        pg_name, pg_desc = self.process_group(raw.get("process_group"), where, pg_id)
        started = self.optional_int(raw, "time_discovered_started_ns", where)
        completed = self.optional_int(raw, "time_discovered_completed_ns", where)
        return FREntry(
            record_id=self.int_field(raw, "record_id", where, index),
            pg_id=pg_id,
            pg_name=pg_name,
            pg_desc=pg_desc,
            collective_seq_id=self.int_field(raw, seq_key, where, 0),
            p2p_seq_id=self.int_field(raw, "p2p_seq_id", where, 0),
            op=op,
            backend=backend.strip(),
            profiling_name=profiling_name,
            input_sizes=self.sizes(raw, "input_sizes", where),
            output_sizes=self.sizes(raw, "output_sizes", where),
            input_dtypes=self.strings(raw, "input_dtypes", where),
            output_dtypes=self.strings(raw, "output_dtypes", where),
            state=self.str_field(raw, "state", where, "unknown").lower(),
            retired=self.bool_field(raw, "retired", where),
            is_p2p=self.bool_field(raw, "is_p2p", where),
            time_created_ns=self.int_field(raw, "time_created_ns", where, 0),
            time_started_ns=started or None,  # JSON writes 0 for "not discovered"
            time_completed_ns=completed or None,
            timeout_ms=self.optional_int(raw, "timeout_ms", where),
            frames=self.frames(raw, where),
        )

    def process_group(self, value: Any, where: str, pg_id: int) -> tuple[str, str]:
        if value is None:
            return (str(pg_id) if pg_id >= 0 else "", "")
        if not isinstance(value, (list, tuple)) or len(value) != 2 or not all(isinstance(v, str) for v in value):
            self.fail(where, "field 'process_group': expected a pair of strings (name, description)")
        return self.text(value[0]), self.text(value[1])

    def pg_config(self, value: Any) -> tuple[FRGroupConfig, ...]:
        if value is None:
            return ()
        if not isinstance(value, dict):
            self.fail("pg_config", f"expected a dict, got {type(value).__name__}")
        self.charge(len(value) + 1, "pg_config")
        groups: list[FRGroupConfig] = []
        for key, group in value.items():
            where = f"pg_config[{str(key)[:40]!r}]"
            if not isinstance(group, dict):
                self.fail(where, f"expected a dict, got {type(group).__name__}")
            self.charge(len(group) + 1, where)
            name = self.str_field(group, "name", where, str(key)) or str(key)
            groups.append(
                FRGroupConfig(self.text(name), self.str_field(group, "desc", where), self.ranks(group, where))
            )
        return tuple(groups)

    def ranks(self, group: Mapping[Any, Any], where: str) -> tuple[int, ...] | None:
        value = group.get("ranks")
        if isinstance(value, str):  # torch writes the list as text: "[0, 1, 2, 3]"
            self.charge(len(value) // 2 + 1, where)
            try:
                value = json.loads(value)
            except ValueError:
                return None
        if not isinstance(value, (list, tuple)):
            return None
        self.charge(len(value), where)
        if not all(isinstance(r, int) and not isinstance(r, bool) for r in value):
            return None
        return tuple(value)

    def pg_status(self, value: Any) -> tuple[FRGroupStatus, ...]:
        if value is None:
            return ()
        if not isinstance(value, dict):
            self.fail("pg_status", f"expected a dict, got {type(value).__name__}")
        self.charge(len(value) + 1, "pg_status")
        out: list[FRGroupStatus] = []
        for key, status in value.items():
            where = f"pg_status[{str(key)[:40]!r}]"
            if not isinstance(status, dict):
                self.fail(where, f"expected a dict, got {type(status).__name__}")
            out.append(
                FRGroupStatus(
                    pg_id=self.text(str(key)),
                    last_enqueued=self.optional_int(status, "last_enqueued_collective", where),
                    last_started=self.optional_int(status, "last_started_collective", where),
                    last_completed=self.optional_int(status, "last_completed_collective", where),
                )
            )
        return tuple(out)
