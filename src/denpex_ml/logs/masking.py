"""Masking of personal and secret data at ingress, in time linear in the text's length.

Masking is an ordered list of :class:`MaskRule` s (an RE2 pattern and a token, in
:mod:`denpex_ml.logs.secret_rules`) applied to text before any other part of the library sees
it, followed by the stateful stages of a
:class:`Masker`: IP addresses, host names in ``host=``-like fields, qualified names and
every host name learned so far become stable pseudonyms (``node-1``, ``ip-1``...) that are
consistent within one masker, i.e. within one job, so per-node reasoning still works. The
mapping from real to pseudonym lives only in memory and is never written anywhere.

Why it is linear
    Every pattern is RE2 (a finite automaton: no backtracking) on UTF-8 bytes. A rule's
    pattern finds an *anchor* (a token prefix, ``name=``); a value of unbounded length is
    then read by a single character-class run, so a declined anchor never makes the same
    bytes be read again from further back. Learned host names are not compiled into a
    regex: text is cut into alphanumeric pieces and looked up in a dict, whatever the
    number of hosts. Private-key blocks are tracked line by line.

What it cannot know
    A host name that appears only in free text, never in a structural position (a launcher
    prefix, ``host=``, ``MASTER_ADDR=``, ``srun: error:``) and without a known domain, is
    not recognised; neither is a secret of no known shape outside a ``name=value`` or
    ``--flag value`` position.
"""

from __future__ import annotations

import ipaddress
import itertools
import re
from collections.abc import Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import re2

from denpex_ml.logs.columnar import matching_line_ends
from denpex_ml.logs.patterns import HOSTNAME
from denpex_ml.logs.prefixes import bracket_hosts, discover_hosts
from denpex_ml.logs.secret_rules import (
    _NAME_PARTS,
    _OPTIONS,
    _PSEUDONYM_B,
    _UNANCHORED,
    DEFAULT_RULES,
    Edit,
    EditFn,
    MaskRule,
    _decode,
    _encode,
    _is_word,
    _keeps,
    _key_block_lines,
    _mask_key_blocks,
    _masked,
    _Match,
    _name_before_separator,
    _rx,
    _substitute,
    mask_secrets,
)
from denpex_ml.logs.system import learn_system_hosts

__all__ = ["DEFAULT_RULES", "MaskRule", "Masker", "mask_files", "mask_secrets"]

_HOST_VALUE = re.compile(rb"[A-Za-z0-9][A-Za-z0-9_.\[\],-]*")
_PIECE = re.compile(rb"[A-Za-z0-9]+")
_PSEUDONYM = re.compile(r"(?:node|ip)-\d+")
_DASH_RUN = re.compile(rb"-{2,}")
_ALNUM = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")


# -- addresses and host names -----------------------------------------------------
_IPV4 = _rx(r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}")
_IPV6 = _rx(r"[0-9A-Fa-f:]*::[0-9A-Fa-f:]*|(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f:]*")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_HOST_KEY = r"[A-Za-z0-9_.-]*(?i:hosts?|hostnames?|nodename|node|nodelist|hostlist|addr|address|ipaddr|endpoint)"
_HOST_ASSIGN = _rx(_HOST_KEY + r"[\"']?[ \t]*[=:][ \t]*[\"']?")
_HOST_FLAG = _rx(r"(?:(?m:^)|[ \t])--" + _HOST_KEY + r"[ \t]+")
_HOSTNAME = HOSTNAME
_HOST_CONTEXT = _rx(r"(?:srun: error:|\bon (?:host|node)|\*\*\* (?:JOB|STEP) [0-9.]+ ON)[ \t]+" + _HOSTNAME)
# a launcher host prefix at a line start or after a carriage return (a progress bar redrawn by
# pdsh / mpirun --tag-output: the launcher's own prefix was read before the line was collapsed)
_HOST_PREFIX = _rx(
    r"(?m)(?:^|\r)[ \t]*(?:[A-Za-z][A-Za-z0-9_-]*[0-9][A-Za-z0-9_.-]*|[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?:\.[A-Za-z0-9_-]+)*): "
)
_HOST_PARTS = frozenset(
    {"host", "hostname", "hosts", "hostnames", "nodename", "node", "nodelist", "hostlist", "addr", "address", "ipaddr",
     "endpoint"}
)  # fmt: skip
_TLDS = r"(?:local|internal|lan|cluster|corp|compute|intra|cloud|priv|localdomain|com|net|org|io|edu|gov|ai)"
_FQDN = _rx(r"(?:[A-Za-z][A-Za-z0-9-]*\.)+" + _TLDS + r"\b")
_NOT_HOST_SUFFIX = (b"error", b"exception", b"warning", b"warn", b"info", b"debug", b"note")
_NOT_HOSTS = frozenset(
    {"localhost", "node", "user", "ip", "n", "none", "null", "unknown", "true", "false", "masked", "token", "secret",
     "email", "n/a", "auto", "env", "default"}
)  # fmt: skip
_IPV4_FULL = re.compile(r"(?:\d{1,3}\.){3}\d{1,3}")
#: Longest host name matched in free text, in alphanumeric pieces (``a-b-c.d.e`` has five).
MAX_HOST_PIECES = 8
#: While fewer distinct first pieces are learned, one RE2 alternation finds them; beyond, a dict lookup per piece.
MAX_FIRST_PIECES_REGEX = 512
#: While at most this many host names are learned, one alternation of literals replaces them (each
#: position costs at most this many literal comparisons, so it stays linear); beyond, the piece lookup.
#: 256 covers a 1,024-GPU job's nodes under two names each (``gpu-7``, ``gpu-7.cluster.local``):
#: on the 512-rank benchmark log (129 names) the alternation masks in 0.6 s what the lookup took 1.4 s for.
MAX_HOSTS_LITERAL_REGEX = 256

_GATE_IPV4 = r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}"
_GATE_IPV6 = r"::|(?:[0-9A-Fa-f]{1,4}:){7}"
_GATE_HOSTS = (
    r"(?i:host|node|addr|endpoint)[A-Za-z0-9_.-]*[\"']?[ \t]*[=:]|--[A-Za-z0-9_.-]*(?i:host|node|addr|endpoint)"
    r"|srun: error:|\bon (?:host|node)|\*\*\* (?:JOB|STEP)|\r|\." + _TLDS + r"\b|PRIVATE KEY"
    r"|(?m:^)[ \t]*(?:[A-Za-z][A-Za-z0-9_-]*[0-9][A-Za-z0-9_.-]*|[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?:\.[A-Za-z0-9_-]+)*): "
)


def _is_host_name(host: str) -> bool:
    """Whether :meth:`Masker.host_pseudonym` learns ``host`` (it gives pseudonyms, masks and
    ordinary words such as ``localhost`` back as they are)."""
    return (
        bool(host)
        and not _PSEUDONYM.fullmatch(host)
        and host.lower() not in _NOT_HOSTS
        and not host.startswith("<masked")
    )


def _names_learned(host: str, known: Container[str]) -> tuple[str, ...]:
    """The names :meth:`Masker.host_pseudonym` registers for ``host`` when the names in ``known``
    are learned already: none for a known name or one it does not learn, else ``host`` and, for a
    qualified name, its short name (``gpu-7`` of ``gpu-7.cluster.local``) unless known or no name.
    The one learning rule :meth:`Masker.host_pseudonym` follows and
    :meth:`Masker.first_pieces_after` predicts."""
    if host in known or not _is_host_name(host):
        return ()
    short = host.split(".", 1)[0]
    if short != host and short.lower() not in _NOT_HOSTS and short not in known and not _PSEUDONYM.fullmatch(short):
        return (host, short)
    return (host,)


_SETS: dict[tuple[MaskRule, ...], Any] = {}


def _applicable(rules: tuple[MaskRule, ...], data: bytes) -> set[int] | None:
    """Indices of the rules (then of the :class:`Masker` stages) that can match ``data``: one RE2
    pass for all of them. None means "run every one" (also when RE2 gave up: never a silent miss)."""
    rset = _SETS.get(rules)
    if rset is None:
        rset = re2.Set.SearchSet(options=_OPTIONS)
        for rule in rules:
            rset.Add(rule.gate_pattern.encode())
        for rx in (_IPV4, _IPV6, _HOST_ASSIGN, _HOST_FLAG, _HOST_CONTEXT, _HOST_PREFIX, _FQDN):
            rset.Add(rx.pattern)
        rset.Compile()
        _SETS[rules] = rset
    found = rset.Match(data)
    return set(found) if found else None


def _matching_line_starts(rx: Any, block: bytes) -> set[int]:
    """Offsets of the starts of the lines of ``block`` where ``rx`` (compiled with ``_OPTIONS``) matches."""
    return {block.rfind(b"\n", 0, stop) + 1 for stop in matching_line_ends(rx.pattern, block, _OPTIONS)}


class _Detector:
    """Finds the lines of a block of UTF-8 bytes that masking may change (a superset).

    The union of the rules' gates (one RE2 scan, one call per flagged line), the
    lines of private-key blocks, and the lines holding a piece that starts a learned host
    name (a dict lookup per piece, however many hosts are known).
    """

    __slots__ = ("_masker",)

    def __init__(self, masker: Masker) -> None:
        self._masker = masker

    def line_starts(self, block: bytes) -> list[int]:
        """Sorted offsets of the starts of the lines of ``block`` that masking may change."""
        starts = _matching_line_starts(self._masker._gate(), block)
        if b"PRIVATE KEY" in block:
            starts.update(_key_block_lines(block))
        first_rx = self._masker._first_regex()
        if first_rx is not None:
            starts |= _matching_line_starts(first_rx, block)
        elif self._masker._first and not self._masker._first.keys().isdisjoint(_PIECE.findall(block)):
            first = self._masker._first
            pos = 0
            for line in block.split(b"\n"):
                if not first.keys().isdisjoint(_PIECE.findall(line)):
                    starts.add(pos)
                pos += len(line) + 1
        return [s for s in sorted(starts) if s < len(block)]  # never the empty "line" after a final newline


@dataclass
class Masker:
    """Masks one job's text. Create one per job so pseudonyms stay consistent within it.

    >>> m = Masker()
    >>> m.mask("connect to 192.168.1.7 failed; mail bob@example.com")
    'connect to ip-1 failed; mail <masked:email>'
    >>> m.mask("MASTER_ADDR=gpu-node-7 --password hunter22; gpu-node-7 is down")
    'MASTER_ADDR=node-1 --password <masked:secret>; node-1 is down'
    """

    rules: tuple[MaskRule, ...] = DEFAULT_RULES
    counts: dict[str, int] = field(default_factory=dict)
    _hosts: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _ips: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _n_nodes: int = field(default=0, init=False, repr=False)
    # free-text matching of learned hosts: name -> pseudonym, first piece -> most pieces
    _free: dict[bytes, bytes] = field(default_factory=dict, init=False, repr=False)
    _first: dict[bytes, int] = field(default_factory=dict, init=False, repr=False)
    _first_rx: Any = field(default=None, init=False, repr=False)
    _known_rx: re.Pattern[bytes] | None = field(default=None, init=False, repr=False)
    _known_literals: Any = field(default=None, init=False, repr=False)  # the same names in RE2, no look-arounds
    #: _known_rx with the names' common prefix first (None: a prefix too short to search for)
    _known_factored: re.Pattern[bytes] | None = field(default=None, init=False, repr=False, compare=False)
    #: qualified names the FQDN stage met that are learned hosts -> their pseudonyms (bytes)
    _fqdn_known: dict[bytes, bytes] = field(default_factory=dict, init=False, repr=False, compare=False)

    def _gate(self) -> Any:
        parts = [r.gate_pattern for r in self.rules] + [_GATE_IPV4, _GATE_IPV6, _GATE_HOSTS]
        return _rx("|".join(f"(?:{p})" for p in parts))

    def detector(self) -> _Detector:
        """An object whose ``line_starts(block: bytes)`` gives the start of every line that
        masking may change (rule gates, private-key blocks, learned hosts)."""
        return _Detector(self)

    # -- pseudonyms -------------------------------------------------------------------
    def pseudonym(self, host: str) -> str:
        """Pseudonym of a host given in a structural position (a name or an IP address)."""
        if _IPV4_FULL.fullmatch(host):
            return self._ip_pseudonym(host)
        if ":" in host and _valid_ipv6(host.encode("ascii", "replace")):
            return self._ip_pseudonym(host)
        return self.host_pseudonym(host)

    def _ip_pseudonym(self, ip: str) -> str:
        p = self._ips.get(ip)
        if p is None:
            p = self._ips[ip] = f"ip-{len(self._ips) + 1}"
        self.counts["ip"] = self.counts.get("ip", 0) + 1
        return p

    def host_pseudonym(self, host: str) -> str:
        """Return (and remember) the pseudonym for ``host``; pseudonyms map to themselves."""
        if not _is_host_name(host):
            return host
        p = self._hosts.get(host)
        if p is None:
            short = host.split(".", 1)[0]  # gpu-7 and gpu-7.cluster.local are one node
            p = self._hosts.get(short)
            if p is None:
                self._n_nodes += 1
                p = f"node-{self._n_nodes}"
            for name in _names_learned(host, self._hosts):
                self._hosts[name] = p
                self._register(name, p)
        return p

    def _register(self, host: str, pseudonym: str) -> None:
        """Make ``host`` matched in free text when it cannot be an ordinary word."""
        name = _encode(host)
        pieces = _free_text_pieces(name)
        if pieces is None:
            return
        self._free[name] = pseudonym.encode()
        self._known_rx = None
        first = pieces[0]
        if first not in self._first:
            self._first_rx = None
        if self._first.get(first, 0) < len(pieces):
            self._first[first] = len(pieces)

    def first_pieces_after(self, hosts: Iterable[str]) -> set[bytes]:
        """The first pieces of the host names matched in free text (the keys of ``_first``) once
        :meth:`learn_hosts` of ``hosts`` is done, without learning anything."""
        first = set(self._first)
        known = set(self._hosts)
        for host in hosts:
            if _IPV4_FULL.fullmatch(host):
                continue  # learn_hosts learns no address
            names = _names_learned(host, known)
            known.update(names)
            for name in names:
                pieces = _free_text_pieces(_encode(name))
                if pieces is not None:
                    first.add(pieces[0])
        return first

    def learn_hosts(self, hosts: Iterable[str]) -> None:
        """Register hostnames found in structural positions (prefixes, launcher summaries). An
        IPv4 address there is no name (its first octet would become a "host" masked in free
        text): the address rule masks it wherever it stands."""
        for h in hosts:
            if not _IPV4_FULL.fullmatch(h):
                self.host_pseudonym(h)

    def reveal_map(self) -> dict[str, str]:
        """Pseudonym -> the real name (or address) it stands for, for the owner of the logs only.

        The first name learned for a pseudonym is given (``gpu-7.cluster.local`` and ``gpu-7``
        are one node). Nothing in the library writes it unless asked: see ``docs/security.md``.

        >>> m = Masker()
        >>> m.mask("MASTER_ADDR=gpu-node-7")
        'MASTER_ADDR=node-1'
        >>> m.reveal_map()
        {'node-1': 'gpu-node-7'}
        """
        out: dict[str, str] = {}
        for real, p in (*self._hosts.items(), *self._ips.items()):
            out.setdefault(p, real)
        return out

    @property
    def n_hosts(self) -> int:
        """Distinct hosts (pseudonyms) known so far."""
        return self._n_nodes

    @property
    def n_host_names(self) -> int:
        """Host names (and aliases) learned so far; grows whenever masking learns a name."""
        return len(self._hosts)

    # -- masking ----------------------------------------------------------------------
    def mask(self, text: str) -> str:
        """Mask secrets, e-mails, user names, IPs and known/qualified hostnames in ``text``."""
        return _decode(self._mask(_encode(text)))

    def mask_known_hosts(self, text: str) -> str:
        """Replace hostnames learned so far (for lines kept before a host was learned)."""
        if not self._first:
            return text
        return _decode(self._mask_known(_encode(text)))

    def mask_known_hosts_lines(self, lines: list[str]) -> list[str]:
        """:meth:`mask_known_hosts` of each of ``lines``, by one pass over them joined by newlines
        (a newline stands between names as a line's ends do, and no name holds one)."""
        if not self._first or not lines:
            return lines
        out = _decode(self._mask_known(_encode("\n".join(lines)))).split("\n")
        if len(out) != len(lines):  # a line that holds a newline itself
            return [self.mask_known_hosts(line) for line in lines]
        return out

    def mask_lines(self, lines: list[str]) -> list[str]:
        """Mask several lines at once (one pass of each rule); the line count is preserved."""
        if not lines:
            return lines
        if len(lines) == 1:
            return [self.mask(lines[0])]
        out = self.mask("\n".join(lines)).split("\n")
        if len(out) != len(lines):  # pragma: no cover - rules never add or remove newlines
            return [self.mask(line) for line in lines]
        return out

    def mask_joined_lines(self, data: bytes, n: int) -> list[str]:
        """:meth:`mask_lines` for ``n`` lines given as UTF-8 joined by newlines (no decoding,
        joining and encoding again): the same lines, the same pseudonyms, the same counts."""
        if n == 0:
            return []
        out = _decode(self._mask(data)).split("\n")
        if len(out) != n:  # pragma: no cover - rules never add or remove newlines
            return [self.mask(line) for line in _decode(data).split("\n")]
        return out

    def mask_all(self, texts: Sequence[str]) -> list[str]:
        """Mask several whole texts of one job so that every host any of them names is masked in all.

        Masking can teach a host (``host=...``, an FQDN); when one text did, every text is masked
        again with all hosts known (whole texts; lines kept while streaming use
        :meth:`mask_known_hosts` instead).
        """
        known = self.n_hosts
        masked = [self.mask(text) for text in texts]
        if self.n_hosts != known:  # hosts learned mid-way: mask again with all known
            masked = [self.mask(text) for text in texts]
        return masked

    def _count(self, name: str, n: int) -> None:
        if n:
            self.counts[name] = self.counts.get(name, 0) + n

    def _mask(self, data: bytes) -> bytes:
        data, n = _mask_key_blocks(data)
        self._count("private-key", n)
        todo = _applicable(self.rules, data)
        for i, rule in enumerate(self.rules):
            if todo is None or i in todo:
                data, n = rule.apply(data)
                self._count(rule.name, n)
        stages: tuple[tuple[Any, EditFn], ...] = (
            (_IPV4, self._ipv4_edit),
            (_IPV6, self._ipv6_edit),
            (_HOST_ASSIGN, self._host_field_edit),
            (_HOST_FLAG, self._host_field_edit),
            (_HOST_CONTEXT, self._host_context_edit),
            (_HOST_PREFIX, self._host_prefix_edit),
            (_FQDN, self._fqdn_edit),
        )
        for j, (regex, edit) in enumerate(stages, start=len(self.rules)):
            if todo is None or j in todo:
                data, _ = _substitute(regex, data, edit)
        return self._mask_known(data)

    def _ipv4_edit(self, m: _Match, data: bytes) -> Edit:
        start, end = m.span()
        if start and (_is_word(data, start - 1) or data[start - 1] == 46):
            return end  # part of a longer token (version string, path)
        if _is_word(data, end) or (data[end : end + 1] == b"." and data[end + 1 : end + 2].isdigit()):
            return end
        ip = m.group().decode()
        if any(int(o) > 255 for o in ip.split(".")):
            return end
        before = data[max(0, start - 9) : start].lower()
        if b"version" in before or before.endswith((b"v", b"ver ", b"==")) or data[end : end + 1] == b"+":
            return end  # a four-part version number
        return start, end, self._ip_pseudonym(ip).encode()

    def _ipv6_edit(self, m: _Match, data: bytes) -> Edit:
        start, end = m.span()
        if _is_word(data, end) or (data[end : end + 1] in (b".", b"-") and _is_word(data, end + 1)):
            # part of a longer token ("::a10.1.2.3": an embedded IPv4 tail; "::0-node-7": a name
            # glued on by a dash, which masked to "ip-1-node-7" would read as a host name next time)
            return m.end()
        if data[end - 1 : end] == b":" and data[end - 2 : end] != b"::":
            end -= 1  # "fe80::1: connection refused"
        elif data[end : end + 1] == b":":
            return m.end()
        # the address is the longest valid tail of the run: "ib0:fe80::1" (NCCL's if:addr) is
        # read from after the first colon; a run longer than any address is tried on its tail only
        lo = max(start, end - 45)
        candidates = [start] if start == lo else []
        candidates += [i + 1 for i in range(lo, end) if data[i] == 58 and data[i + 1 : i + 2] != b":" and i > start]
        for s in candidates:
            if s == start:
                if _is_word(data, s - 1) or (data[s - 1 : s] in (b".", b"-") and s > 0):
                    continue
                if data[s : s + 1] == b":" and data[s : s + 2] != b"::":
                    s += 1
            elif data[s - 2 : s - 1] == b":":
                continue
            ip = data[s:end]
            if ip and ip[-1] in _HEX and _valid_ipv6(ip):
                return s, end, self._ip_pseudonym(ip.decode()).encode()
        return m.end()

    def _host_value(self, data: bytes, pos: int) -> Edit:
        """The host name (or node list) starting at ``pos`` becomes its pseudonym."""
        v = _HOST_VALUE.match(data, pos)
        if v is None:
            return pos
        value = v.group().rstrip(b".,")
        end = v.start() + len(value)
        text = value.decode()
        if not value or data[end : end + 3] == b"://" or _keeps(value):
            return end
        if b"[" in value:  # a Slurm node list, gpu-[001-004,007]
            return v.start(), end, _masked("nodelist")
        if b"," in value:
            parts = text.split(",")
            if all(p and not p[0].isdigit() for p in parts):
                return v.start(), end, ",".join(self.host_pseudonym(p) for p in parts).encode()
            return end
        if text[0].isdigit() or text.lower() in _NOT_HOSTS or _PSEUDONYM.fullmatch(text):
            return end  # "node: 0", an IP masked already
        self._count("host", 1)
        return v.start(), end, self.host_pseudonym(text).encode()

    def _host_field_edit(self, m: _Match, data: bytes) -> Edit:
        name = _name_before_separator(m.group())
        parts = [p for p in _NAME_PARTS.split(name[-128:].decode("ascii", "replace")) if p]
        if not parts or parts[-1].lower() not in _HOST_PARTS:
            return m.end()
        return self._host_value(data, m.end())

    def _host_context_edit(self, m: _Match, data: bytes) -> Edit:
        host = m.group().split()[-1]
        e = m.end()
        s = e - len(host)
        if host.lower().endswith(_NOT_HOST_SUFFIX) or host.endswith(b".py"):
            return m.end()
        return s, e, self.host_pseudonym(host.decode()).encode()

    def _host_prefix_edit(self, m: _Match, data: bytes) -> Edit:
        host = m.group().strip()[:-1]
        e = m.end() - 2
        s = e - len(host)
        if host.lower().endswith(_NOT_HOST_SUFFIX) or host.endswith(b".py"):
            return m.end()
        return s, e, self.host_pseudonym(host.decode()).encode()

    def _fqdn_edit(self, m: _Match, data: bytes) -> Edit:
        start, end = m.span()
        if start and (_is_word(data, start - 1) or data[start - 1] in b".-"):
            return end
        if data[end : end + 1] == b"-" or end - start > 253:
            return end
        found = data[start:end]
        known = self._fqdn_known.get(found)
        if known is not None:  # a learned name: what the lines below give it, without asking again
            return start, end, known
        if _PSEUDONYM_B.fullmatch(_DASH_RUN.split(found.split(b".", 1)[0])[-1]):
            # "ip-1.com": an address masked already (10.1.2.3.com), also behind a run of dashes
            # that glued it to a word ("KEY-----10.1.2.3.com")
            return end
        name = found.decode()
        pseudonym = self.host_pseudonym(name)
        if pseudonym != name and self._hosts.get(name) == pseudonym:  # it stays this name's pseudonym
            self._fqdn_known[found] = pseudonym.encode()
        return start, end, pseudonym.encode()

    def _sub_known(self, data: bytes) -> bytes:
        """``_known_rx.sub(pseudonym, data)``, tried only where a learned name stands.

        RE2 finds the leftmost name at C speed (Python's re would try the look-behind at every
        byte); its alternatives are in the same order, so the name it finds is the one ``re``
        tries first. With alphanumeric neighbours, ``re`` itself decides at that position (a
        shorter name may still fit); a position that fails is left one byte on, as ``re`` does.
        """
        known = self._known_rx
        assert known is not None
        free = self._free
        match = self._known_literals._regexp.Match
        end = len(data)
        parts: list[bytes] = []
        last = pos = 0
        while pos < end:
            start, stop = match(_UNANCHORED, data, pos, end)[0]
            if start == -1:
                break
            if (start == 0 or data[start - 1] not in _ALNUM) and (stop == end or data[stop] not in _ALNUM):
                name = data[start:stop]
            else:
                m = known.match(data, start)
                if m is None:
                    pos = start + 1
                    continue
                name, stop = m.group(), m.end()
            parts.append(data[last:start])
            parts.append(free[name])
            last = pos = stop
        if not parts:
            return data
        parts.append(data[last:])
        return b"".join(parts)

    def _first_regex(self) -> Any | None:
        """RE2 alternation of the first pieces of the learned hosts, while they are few."""
        if not self._first or len(self._first) > MAX_FIRST_PIECES_REGEX:
            return None
        if self._first_rx is None:
            self._first_rx = re2.compile(first_pieces_alternation(self._first), options=_OPTIONS)
        return self._first_rx

    def _candidates(self, data: bytes) -> Iterator[int]:
        """Offsets in ``data`` where a piece that starts a learned host name begins."""
        first = self._first
        rx = self._first_regex()
        if rx is None:
            for m in _PIECE.finditer(data):
                if m.group() in first:
                    yield m.start()
            return
        pos = 0
        for m in rx.finditer(data):
            start = m.start()
            if start < pos:
                continue
            piece = _PIECE.match(data, start)
            assert piece is not None  # every first piece is alphanumeric
            pos = piece.end()
            if (start == 0 or not data[start - 1 : start].isalnum()) and piece.group() in first:
                yield start

    def _mask_known(self, data: bytes) -> bytes:
        """Learned host names wherever they stand between non-alphanumeric characters."""
        first = self._first
        if not first:
            return data
        free = self._free
        if len(free) <= MAX_HOSTS_LITERAL_REGEX:
            if self._known_rx is None:
                ordered = sorted(free, key=len, reverse=True)
                names = b"|".join(re.escape(h) for h in ordered)
                self._known_rx = re.compile(rb"(?<![A-Za-z0-9])(?:" + names + rb")(?![A-Za-z0-9])")
                self._known_literals = re2.compile(b"|".join(re2.escape(h) for h in ordered), options=_OPTIONS)
                self._known_factored = _factored_names(ordered)
            if self._known_factored is not None:
                return self._known_factored.sub(lambda m: free[m.group()], data)
            return self._sub_known(data)
        if self._first_regex() is None and first.keys().isdisjoint(_PIECE.findall(data)):
            return data
        out: list[bytes] = []
        last = 0
        for start in self._candidates(data):
            if start < last:
                continue
            pieces = list(itertools.islice(_PIECE.finditer(data, start), first[_piece_at(data, start)]))
            for k in range(len(pieces), 0, -1):
                end = pieces[k - 1].end()
                p = free.get(data[start:end])
                if p is not None:
                    out.append(data[last:start])
                    out.append(p)
                    last = end
                    break
        if not out:
            return data
        out.append(data[last:])
        return b"".join(out)


#: Shortest common prefix of the learned names for which :func:`_factored_names` is used.
MIN_FACTORED_PREFIX = 3


def _factored_names(ordered: list[bytes]) -> re.Pattern[bytes] | None:
    """``_known_rx`` (the names in this order between non-alphanumerics) written with the names'
    common prefix first: ``P(?<![A-Za-z0-9]P)(?:rest1|rest2...)(?![A-Za-z0-9])``. It matches where
    and as ``_known_rx`` does (the look-behind after ``P`` reads the byte before ``P``), and
    Python's ``re`` searches for the literal ``P`` instead of trying the look-behind at every byte:
    ``sub`` with it is about twice as fast as :meth:`Masker._sub_known` on NCCL-heavy lines.
    None when the names share fewer than :data:`MIN_FACTORED_PREFIX` bytes."""
    if not ordered:
        return None
    low, high = min(ordered), max(ordered)  # every name lies between them: their prefix is all the names'
    k = 0
    while k < min(len(low), len(high)) and low[k] == high[k]:
        k += 1
    prefix = low[:k]
    if len(prefix) < MIN_FACTORED_PREFIX:
        return None
    rests = b"|".join(re.escape(h[len(prefix) :]) for h in ordered)
    head = re.escape(prefix)
    return re.compile(head + rb"(?<![A-Za-z0-9]" + head + rb")(?:" + rests + rb")(?![A-Za-z0-9])")


def _free_text_pieces(name: bytes) -> list[bytes] | None:
    """The alphanumeric pieces of a host name matched in free text; ``None``: a name that is not
    ("main", "login": masked where they stand in a host field, not everywhere; too long; too many pieces)."""
    if len(name) > 253 or not any(c in name for c in b"0123456789-."):
        return None
    pieces = _PIECE.findall(name)
    if not pieces or len(pieces) > MAX_HOST_PIECES or not name[:1].isalnum() or not name[-1:].isalnum():
        return None
    return pieces


def first_pieces_alternation(pieces: Iterable[bytes]) -> bytes:
    """The RE2 alternation of the learned hosts' first pieces (longest first)."""
    return b"|".join(re2.escape(p) for p in sorted(pieces, key=len, reverse=True))


def _piece_at(data: bytes, start: int) -> bytes:
    m = _PIECE.match(data, start)
    return m.group() if m is not None else b""


def _valid_ipv6(ip: bytes) -> bool:
    if len(ip) > 45 or ip == b"::" or ip.count(b":") < 2:
        return False
    try:
        ipaddress.IPv6Address(ip.decode("ascii"))
    except ValueError:
        return False
    return True


def mask_files(masker: Masker, files: Sequence[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """The masking entry point of readers that keep whole files (the incident store).

    Returns the masked names and texts of ``files`` (``(name, text)`` of one job), masked the
    way ingestion masks the lines it keeps: the hosts that system members (kernel, nvidia-smi,
    DCGM, Slurm node lists) and line prefixes name are learned first, so the pseudonyms do not
    depend on the order of the files; then every text is masked (:meth:`Masker.mask_all`).
    """
    texts = [learn_system_hosts(masker, name, text) for name, text in files]
    hosts: set[str] = set()
    for text in texts:
        hosts |= discover_hosts(text) | bracket_hosts(text)
    masker.learn_hosts(sorted(hosts))
    masked = masker.mask_all(texts)
    return [masker.mask(name) for name, _ in files], masked
