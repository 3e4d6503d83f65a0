"""Names of files and archive members: shown safely, checked before use.

Names come from untrusted archives and directories: they may not be valid UTF-8 (they
arrive with ``surrogateescape``), hold control characters, be absolute or climb out with
``..``. :func:`display_name` is how every message shows one; :func:`check_member_name`
normalises a member name or raises :class:`~denpex_ml.errors.UnsafeArchiveMemberError`.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from denpex_ml.errors import UnsafeArchiveMemberError

__all__ = ["check_member_name", "display_name"]


def display_name(name: str) -> str:
    """``name`` safe to print: undecodable bytes and control characters as backslash escapes.

    File names that are not valid UTF-8 arrive with ``surrogateescape`` (``os.walk``,
    ``tarfile``); they are shown as ``\\xNN`` like the byte they stand for.

    >>> display_name("r\\udcff.log")
    'r\\\\xff.log'
    >>> display_name("a\\nb")
    'a\\\\nb'
    """
    if name.isprintable():
        return name
    out: list[str] = []
    for ch in name:
        o = ord(ch)
        if 0xDC80 <= o <= 0xDCFF:  # a byte that was not UTF-8
            out.append(f"\\x{o - 0xDC00:02x}")
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    return "".join(out)


def _check_member_name(source: str, name: str) -> str:
    posix = name.replace("\\", "/")
    if posix.startswith("/") or (len(posix) > 1 and posix[1] == ":"):
        raise UnsafeArchiveMemberError(
            f"{display_name(source)}: archive member '{display_name(name)}' has an absolute path"
        )
    parts = PurePosixPath(posix).parts
    if ".." in parts:
        raise UnsafeArchiveMemberError(f"{display_name(source)}: archive member '{display_name(name)}' contains '..'")
    return "/".join(p for p in parts if p not in (".", ""))


def check_member_name(source: str, name: str) -> str:
    """``name`` normalised to a relative POSIX path; raises on absolute paths and ``..``."""
    return _check_member_name(source, name)
