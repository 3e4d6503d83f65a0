"""Hang analysis: what each rank was doing when the job stopped.

* :mod:`~denpex_ml.hang.frames` - stack frames from tracebacks, py-spy and faulthandler dumps;
* :mod:`~denpex_ml.hang.phase` - the phase of training a rank was in (generation, checkpoint save...);
* :mod:`~denpex_ml.hang.scan` - one pass over every stream's lines: per-rank facts and the signals a line shows;
* :mod:`~denpex_ml.hang.suspects` - the ranks the others wait for, by an ordered list of rules;
* :mod:`~denpex_ml.hang.analysis` - the ranks side by side, and the :class:`HangReport` (states, suspects, signals);
* :mod:`~denpex_ml.hang.flight_recorder` - cross-rank analysis of PyTorch Flight Recorder dumps;
* :mod:`~denpex_ml.hang.advice` - rival hang classes, what tells them apart, what to collect next.
"""

from __future__ import annotations
