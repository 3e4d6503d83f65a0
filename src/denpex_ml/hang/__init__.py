"""Hang analysis: what each rank was doing when the job stopped.

* :mod:`~denpex_ml.hang.frames` - stack frames from tracebacks, py-spy and faulthandler dumps;
* :mod:`~denpex_ml.hang.phase` - the phase of training a rank was in (generation, checkpoint save...);
* :mod:`~denpex_ml.hang.analysis` - per-rank collectives, suspects, signals: the :class:`HangReport`;
* :mod:`~denpex_ml.hang.flight_recorder` - cross-rank analysis of PyTorch Flight Recorder dumps;
* :mod:`~denpex_ml.hang.advice` - rival hang classes, what tells them apart, what to collect next.
"""

from __future__ import annotations
