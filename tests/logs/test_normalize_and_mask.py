"""Decoding, normalisation, masking, timestamps and bounded retention."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from denpex_ml.cli import main
from denpex_ml.logs import Masker, Retention, parse_timestamp, read_logs

SECRETS = {
    "hf": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "gh": "ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "bearer": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
    "password": "hunter2secret",
    "email": "alice.smith@example.org",
    "ipv4": "192.168.17.23",
    "ipv6": "fe80::1ff:fe23:4567:890a",
    "user": "alicesmith",
    "host": "gpu-node-042.prod.corp",
    "short_host": "dgx-a100-17",
}

PLANTED = f"""[rank0]: export HF_TOKEN={SECRETS["hf"]}
[rank0]: git clone https://{SECRETS["gh"]}@github.com/org/repo
[rank1]: aws_access_key_id = {SECRETS["aws"]}
[rank1]: Authorization: Bearer {SECRETS["bearer"]}
[rank1]: db password={SECRETS["password"]}
[rank2]: contact {SECRETS["email"]} for access
[rank2]: NCCL INFO NET/Socket : Using [0]eth0:{SECRETS["ipv4"]}<0> [1]ib0:{SECRETS["ipv6"]}
[rank3]:   File "/home/{SECRETS["user"]}/project/train.py", line 12, in <module>
[rank3]: RuntimeError: connect() to {SECRETS["host"]}:29500 failed
{SECRETS["short_host"]}: [rank4]: Traceback (most recent call last):
{SECRETS["short_host"]}:1234:1234 [0] NCCL INFO cudaDriverVersion 12040
"""


def test_no_planted_secret_survives_ingestion(tmp_path: Path) -> None:
    b = read_logs(text=PLANTED)
    out = b.text() + json.dumps(b.summary()) + " ".join(map(str, b.streams))
    for name, secret in SECRETS.items():
        assert secret not in out, name
    assert "<masked:token>" in out and "<masked:email>" in out and "/home/user/" in out
    assert b.ranks == [0, 1, 2, 3, 4]


def test_no_planted_secret_in_cli_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = tmp_path / SECRETS["short_host"]
    job.mkdir()
    (job / f"{SECRETS['short_host']}-rank0.log").write_text(PLANTED)
    for argv in (["ingest", str(job), "--json"], ["ingest", str(job)]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        for name, secret in SECRETS.items():
            if name == "short_host":  # the user's own path argument is echoed in the header only
                assert out.count(secret) <= 1, name
            else:
                assert secret not in out, name


def test_pseudonyms_are_stable_within_a_job() -> None:
    m = Masker()
    a = m.mask("connect to 10.1.1.1 and gpu-7.cluster.local")
    b = m.mask("again 10.1.1.1 then 10.1.1.2, gpu-7.cluster.local")
    assert a == "connect to ip-1 and node-1"
    assert b == "again ip-1 then ip-2, node-1"


def test_version_numbers_are_not_ip_addresses() -> None:
    m = Masker()
    assert m.mask("NCCL version 2.18.1.1+cuda12.1") == "NCCL version 2.18.1.1+cuda12.1"
    assert m.mask("c10::Error at::Tensor 10:42:28.858") == "c10::Error at::Tensor 10:42:28.858"


def test_utf16_with_bom(tmp_path: Path) -> None:
    p = tmp_path / "rank0.log"
    p.write_bytes("step 1\nRuntimeError: ünïcode\n".encode("utf-16"))
    b = read_logs(p)
    assert [ln.text for ln in b.rank(0).lines] == ["step 1", "RuntimeError: ünïcode"]


def test_invalid_utf8_ansi_cr_and_nul(tmp_path: Path) -> None:
    p = tmp_path / "rank0.log"
    p.write_bytes(
        b"bad \xff\xfe bytes\n"
        b"\x1b[31mERROR\x1b[0m colored\n"
        b" 10%|#   | 1/10\r 50%|#####  | 5/10\r100%|##########| 10/10\n"
        b"nul\x00byte\r\n"
    )
    texts = [ln.text for ln in read_logs(p).rank(0).lines]
    assert texts == ["bad \ufffd\ufffd bytes", "ERROR colored", "100%|##########| 10/10", "nulbyte"]


def test_huge_line_without_newline_is_streamed_and_cut(tmp_path: Path) -> None:
    p = tmp_path / "rank0.log"
    with p.open("wb") as fh:
        fh.write(b"start\n")
        chunk = b"x" * (1 << 20)
        for _ in range(40):  # a 40 MiB line
            fh.write(chunk)
        fh.write(b"\nRuntimeError: after the long line\n")
    tracemalloc.start()
    b = read_logs(p)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    texts = [ln.text for ln in b.rank(0).lines]
    assert texts[0] == "start"
    assert texts[1].startswith("xxx") and texts[1].endswith("[line truncated]") and len(texts[1]) < 70_000
    assert texts[2] == "RuntimeError: after the long line"
    assert b.n_truncated_lines == 1
    assert peak < 20 * (1 << 20), peak  # far below the 40 MiB line


def test_retention_is_bounded_but_counts_everything() -> None:
    noise = [f"[rank{r}]: step {i} loss 1.{i % 97}\n" for i in range(20_000) for r in (0, 1)]
    text = "".join(noise[:20_000]) + "[rank1]: RuntimeError: the one line that matters\n" + "".join(noise[20_000:])
    ret = Retention(head=10, tail=20, salient=50)
    b = read_logs(text=text, retention=ret)
    assert b.n_lines == 40_001
    assert b.rank(1).n_lines == 20_001
    assert len(b.rank(0).lines) <= 10 + 20 + 50
    assert any("the one line that matters" in ln.text for ln in b.rank(1).lines)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-04-19T10:42:28.500Z boom", 1713523348.5),
        ("[2024-04-19 10:42:28,250] ERROR x", 1713523348.25),
        ("2024-04-19 12:42:28+02:00 x", 1713523348.0),
        ("[rank3]:[E419 10:42:28.858931807 ProcessGroupNCCL.cpp:616] x", None),
        ("Apr 19 10:42:28 node-1 kernel: NVRM: Xid 79", None),
        ("no timestamp", None),
    ],
)
def test_timestamps(text: str, expected: float | None) -> None:
    ts = parse_timestamp(text)
    if expected is not None:
        assert ts == pytest.approx(expected)
    elif "no timestamp" in text:
        assert ts is None
    else:
        assert ts is not None


def test_glog_timestamps_order_events() -> None:
    a = parse_timestamp("[E419 10:42:28.100000 x")
    b = parse_timestamp("[E419 10:42:29.000000 x")
    assert a is not None and b is not None and a < b


def test_a_host_learned_late_is_masked_in_lines_kept_earlier() -> None:
    # the first lines name the host only inside the text (glog prefix first); NCCL's own
    # host:pid:tid prefix at the start of a later line is where the host is learned
    lines = [
        "W0926 02:43:25.316576 gpu-host-a:328292:328410 [7] misc/socket.cc:538 NCCL WARN Net : connection reset",
        *[f"[rank0]: step {i} loss 1.{i} lr 3e-4 tokens/s 81234" for i in range(1000)],  # > 16 KiB: a fast-path run
        "gpu-host-a:2365624:2365721 [0] NCCL INFO comm 0x5585 rank 0 nranks 4 cudaDev 0 busId 4f000 - Init START",
        "Root Cause (first observed failure):",
    ]
    b = read_logs(text="\n".join(lines) + "\n")
    assert "gpu-host-a" not in b.text()
    assert any("node-1:2365624" in line.text for s in b.streams.values() for line in s.lines)


def test_a_launcher_summary_ends_with_its_file(tmp_path: Path) -> None:
    """A summary cut at the end of one file does not read the next file's lines as its fields."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "rank0.log").write_text(
        "Failures:\n  <NO_OTHER_FAILURES>\nRoot Cause (first observed failure):\n[0]:\n  rank      : 0 (local_rank: 0)\n",
        encoding="utf-8",
    )
    (job / "rank1.log").write_text("  exitcode  : -9 (pid: 77)\n  host      : gpu-node-9\nstep 1\n", encoding="utf-8")
    root = read_logs(job).launcher.root_cause
    assert root is not None and root.rank == 0
    assert root.exitcode is None and root.host is None


def test_an_address_in_a_host_position_is_not_learned_as_a_host_name() -> None:
    m = Masker()
    m.learn_hosts(["10.9.8.7", "gpu-node-3"])
    assert m.mask("step 10 of 20 on gpu-node-3 via 10.9.8.7") == "step 10 of 20 on node-1 via ip-1"
