"""The order of a diagnosis's alternatives: most likely first, with the hang classes kept in view.

A job whose ranks all wait (a hang) is one of a few hang classes that its log often cannot tell
apart: a rank-0-only barrier (``subset-rank-collective-hang``), a rank busy past the timeout
(``host-work-timeout``), ranks issuing different collectives (``collective-mismatch``). The
waiting ranks' watchdog lines look the same in all three, and a broken link leaves the same
lines. In such a job an unlikely failure of another family (a crash below
:data:`FOREIGN_FLOOR`) is listed after the hang and transport classes, so the alternatives name
the competing hang classes. The first answer is never moved, and no probability changes.

Measured out of fold on the 1,281 real logs (``denpex-ml eval``, grouped by thread): top-3 on
the hang logs 0.756 -> 0.775 (160), on the crash logs 0.946 -> 0.944 (557), unchanged elsewhere;
top-3 on the synthetic sets unchanged. (Keeping only the hang classes in view gave the hang logs
0.781 but cost the synthetic transport jobs up to 7 points.)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from denpex_ml.taxonomy.groups import HANG_IDS, TRANSPORT_IDS

__all__ = ["FOREIGN_FLOOR", "alternatives_order"]

#: In a hang, an alternative outside the hang and transport families this likely or more keeps its place.
FOREIGN_FLOOR = 0.2
#: The failures whose ranks end up waiting on each other: hangs, and transport faults (a broken
#: link or bootstrap leaves the ranks in the same watchdog timeouts)
_WAITING = HANG_IDS | TRANSPORT_IDS


def alternatives_order(proba: np.ndarray, labels: Sequence[str], is_hang: bool | np.ndarray) -> np.ndarray:
    """Class indices, best alternative first, for one row of probabilities (a 1-D array) or for
    many (2-D, with one ``is_hang`` per row).

    Without a hang this is the descending order of ``proba``. In a hang, after the first answer
    come the hang classes and the other classes at least :data:`FOREIGN_FLOOR` likely (in
    descending probability), then the rest."""
    p = np.asarray(proba, dtype=float)
    if p.ndim == 2:
        hang = np.broadcast_to(np.asarray(is_hang, dtype=bool), (p.shape[0],))
        return np.stack([alternatives_order(row, labels, bool(h)) for row, h in zip(p, hang, strict=True)])
    order = np.argsort(-p, kind="stable")
    if not is_hang or len(order) < 3:
        return order
    in_hang = np.fromiter((labels[int(i)] in _WAITING for i in order[1:]), dtype=bool, count=len(order) - 1)
    keep = in_hang | (p[order[1:]] >= FOREIGN_FLOOR)
    return np.concatenate([order[:1], order[1:][keep], order[1:][~keep]])
