"""Property tests (hypothesis) of masking and the launcher-prefix parser.

Kept in the suite with the failing cases they found as ``@example`` s. Time is asserted as
a ratio between two input sizes (linear: about the size ratio), never as a wall clock.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from denpex_ml.logs import Masker, read_logs
from denpex_ml.logs.columnar import line_indices
from denpex_ml.logs.prefixes import _HOST, discover_hosts, message_rank, parse_prefix, rank_from_path

# Fragments that the masking rules and prefix formats react to, to build hostile inputs from.
FRAGMENTS = [
    "a", "Z", "1", "9", "_", "-", ".", ":", "::", "@", "=", "/", "\\", " ", "\t", "\r", "'", '"', ",", ";", "&", "[", "]",
    "(", ")", "{", "}", "hf_", "ghp_", "AKIA", "AIza", "sk-", "xoxb-", "eyJ", "token", "key", "password", "Bearer ",
    "Basic ", "://", "https://", "/home/", "C:\\Users\\", "host=", "MASTER_ADDR=", "--password ", "--master_addr ",
    "docker login ", "wandb login ", "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "MIIEow",
    "10.1.2.3", "255.", "fe80::", "ib0:", "[rank3]: ", "node-7: ", "gpu7:12:34 [0] NCCL ", "srun: error: ",
    ".com", ".local", "é", "\udcff", "node-1", "ip-2", "<masked:secret>",
]  # fmt: skip
_fragments = st.sampled_from(FRAGMENTS)
hostile_text = st.lists(_fragments | st.text(max_size=3), max_size=40).map("".join)
hostile_lines = st.lists(hostile_text, min_size=1, max_size=8).map("\n".join)
_settings = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _masker_with_hosts() -> Masker:
    m = Masker()
    m.learn_hosts(["node-7", "gpu7", "dgx-a100-17.cluster.local"])
    return m


@_settings
@given(hostile_lines)
@example("a:" * 200)
@example("a." * 200 + "@")
@example("tokens:" * 50)
@example("[1]ib0:fe80::1ff:fe23:4567:890a<0>")
@example("RuntimeError: -----BEGIN RSA PRIVATE KEY-----\nRuntimeError: MIIEowIBAAKCAQEAu1SU1LfVLPHC\n")
@example("r\udcff.log")
@example("gpu7:12:34 [0] NCCL node-1.com")  # "node-1" became an alias of a new host
@example("-----BEGIN RSA PRIVATE KEY-----\n-----BEGIN RSA PRIVATE KEY-----docker login ")  # read as key body
@example("/home/::a")  # "/home/ip-1" then became "/home/user"
@example("10.1.2.3.com")  # "ip-1.com" then became a host name
@example("-----END RSA PRIVATE KEY-----10.1.2.3.com")  # "KEY-----ip-1.com" then became a host name
@example("-----BEGIN RSA PRIVATE KEY-----\n/home/MASTER_ADDR=")  # "/home/user=" read as key
@example("::a10.1.2.3")  # "ip-1.1.2.3" then gave up "1.1.2.3" as an address
@example("host=G::a")  # "node-4::a" was then read as the IPv6 address "4::a"
@example("::0-node-7: ")  # "ip-1-node-7: " was then read as a host prefix
def test_masking_never_crashes_keeps_lines_and_is_idempotent(text: str) -> None:
    m = _masker_with_hosts()
    once = m.mask(text)
    assert once.count("\n") == text.count("\n")
    assert m.mask(once) == once
    assert m.mask_lines(text.split("\n")) == once.split("\n") or m.n_host_names  # hosts learned on the way


@_settings
@given(hostile_lines)
@example("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHC\n-----END RSA PRIVATE KEY-----\n")
@example("x\n\rnode-9: y\nMASTER_ADDR=mst-5\nlost mst-5\n")
def test_masking_only_flagged_lines_equals_masking_every_line(text: str) -> None:
    """The ingest path masks only the lines the detector flags; that must change nothing."""
    m = _masker_with_hosts()
    lines = text.split("\n")
    m.mask_lines(lines)  # learn every host the text teaches, so both passes below know the same
    everything = m.mask_lines(lines)
    flagged = sorted(line_indices(m.detector(), text.encode("utf-8", "surrogatepass")))
    assert all(i < len(lines) for i in flagged)
    partial = list(lines)
    for i, masked in zip(flagged, m.mask_lines([lines[i] for i in flagged]), strict=True):
        partial[i] = masked
    assert partial == everything


@_settings
@given(hostile_text)
def test_prefix_parsers_never_crash(line: str) -> None:
    p = parse_prefix(line)
    if p is not None:
        assert p.rest in line or "\r" in line or p.format == "jsonl"
    discover_hosts(line)
    message_rank(line)
    rank_from_path(line)


_ORIGINAL_HOST = re.compile(
    r"((?:\d{1,3}(?:\.\d{1,3}){3})|ip-\d+|(?:[A-Za-z][\w-]*\d[\w.-]*)|(?:[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?:\.[\w-]+)*)): "
)


@_settings
@given(st.text(alphabet="aZz19_-.: é٣\t", max_size=16))
@example("a1" * 6 + ":")
def test_linear_host_prefix_accepts_what_the_backtracking_one_did(line: str) -> None:
    a, b = _ORIGINAL_HOST.match(line), _HOST.match(line)
    assert (a and a.group(1)) == (b and b.group(1))


def _seconds(fn: Callable[[str], object], text: str) -> float:
    """Best of three, in CPU seconds of this process (other processes' load does not count)."""
    best = float("inf")
    for _ in range(3):
        t = time.process_time()
        fn(text)
        best = min(best, time.process_time() - t)
    return best


def _assert_linear(fn: Callable[[str], object], unit: str, factor: int = 8) -> None:
    """``fn`` on ``factor`` times more input takes about ``factor`` times longer, not its square.

    The small input grows until it takes a measurable time (or reaches 64 KB); linear time
    gives a ratio near ``factor``, quadratic near ``factor ** 2``; the bound is ``3 * factor``.
    """
    reps = max(1, 2_000 // max(1, len(unit)))
    t_small = _seconds(fn, unit * reps)
    while t_small < 0.005 and len(unit) * reps < 64_000:
        reps *= 2
        t_small = _seconds(fn, unit * reps)
    t_large = _seconds(fn, unit * reps * factor)
    if t_large < 0.02:  # too fast to measure: no blow-up at this size
        return
    assert t_large / max(t_small, 1e-3) < 3 * factor, (unit, len(unit) * reps, t_small, t_large)


_units = st.lists(_fragments, min_size=1, max_size=6).map("".join)
_time_settings = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_time_settings
@given(_units)
@example("a:")  # 64 KB took 9 s (IPv6 rule)
@example("ab:")  # 7 s (IPv6 rule)
@example("a.")
@example("tokens:")  # a declined name=value rescanned its value
@example("key:")
@example("a1")
@example("-----BEGIN RSA PRIVATE KEY-----\n")
@example("/home/a")
@example("host=")
def test_masking_time_is_linear(unit: str) -> None:
    _assert_linear(lambda s: _masker_with_hosts().mask(s), unit)


@_time_settings
@given(_units)
@example("a1")  # discover_hosts: 32 KB took 6.5 s
@example("a-")
@example("node-7: ")
def test_prefix_parsing_time_is_linear(unit: str) -> None:
    def parse(s: str) -> None:
        parse_prefix(s[:4096])
        discover_hosts(s)

    _assert_linear(parse, unit)


def test_many_distinct_hosts_scale_linearly(capfd: object) -> None:
    """Host pseudonyms: a dict lookup per piece, not one growing regex (RE2 'pattern too large')."""

    def nccl(n: int) -> str:
        return "".join(f"host{i:06d}-a:{i}:{i} [0] NCCL INFO Channel 00 : 0 -> 1 via NET/IB/0\n" for i in range(n))

    def seconds(n: int) -> float:
        text = nccl(n)
        t = time.process_time()
        b = read_logs(text=text)
        assert b.n_hosts == n
        return time.process_time() - t

    small, large = seconds(2_000), seconds(16_000)
    assert large / small < 3 * 8, (small, large)
    err = capfd.readouterr().err  # type: ignore[attr-defined]
    assert "DFA out of memory" not in err and "pattern too large" not in err


_MANY_HOSTS = [f"gpu-node-{i}" for i in range(90)] + [f"gpu-node-{i}.cluster.local" for i in range(0, 90, 3)] + ["gpu7"]
_host_fragments = st.sampled_from([*FRAGMENTS, "gpu-node-1", "gpu-node-17", "gpu-node-17.cluster", ".cluster.local"])
_host_text = st.lists(_host_fragments | st.text(max_size=3), max_size=40).map("".join)


@_settings
@given(_host_text)
@example("xgpu-node-17.cluster.localgpu-node-1 gpu-node-17.cluster.local.gpu-node-1a:gpu-node-10")
def test_learned_hosts_are_masked_alike_by_the_literal_alternation_and_the_piece_lookup(text: str) -> None:
    """Which learned names :meth:`Masker.mask_known_hosts` replaces does not depend on the way it
    finds them (one alternation of the names while they are few, a lookup per piece beyond)."""
    import denpex_ml.logs.masking as masking

    def masked(limit: int) -> str:
        saved = masking.MAX_HOSTS_LITERAL_REGEX
        masking.MAX_HOSTS_LITERAL_REGEX = limit
        try:
            m = Masker()
            m.learn_hosts(_MANY_HOSTS)
            return m.mask_known_hosts(text)
        finally:
            masking.MAX_HOSTS_LITERAL_REGEX = saved

    assert masked(1 << 30) == masked(0)


@_settings
@given(st.lists(_host_text, max_size=6))
@example(["gpu-node-1", "7.cluster.local", "gpu-node-17.cluster", ".local x"])
def test_known_hosts_are_masked_in_many_lines_as_in_each(lines: list[str]) -> None:
    """:meth:`Masker.mask_known_hosts_lines` (one pass over the joined lines) is
    :meth:`Masker.mask_known_hosts` of each line, on both ways of finding the names."""
    import denpex_ml.logs.masking as masking

    for hosts in (_MANY_HOSTS[:5], _MANY_HOSTS):
        for limit in (0, 1 << 30):
            saved = masking.MAX_HOSTS_LITERAL_REGEX
            masking.MAX_HOSTS_LITERAL_REGEX = limit
            try:
                m = Masker()
                m.learn_hosts(hosts)
                assert m.mask_known_hosts_lines(lines) == [m.mask_known_hosts(line) for line in lines]
            finally:
                masking.MAX_HOSTS_LITERAL_REGEX = saved
