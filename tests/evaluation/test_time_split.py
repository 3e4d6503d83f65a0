"""eval/time_split.py: the held-out batches leave the training config, overrides are checked."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_SCRIPT = Path(__file__).resolve().parents[2] / "eval" / "time_split.py"
_spec = importlib.util.spec_from_file_location("time_split", _SCRIPT)
assert _spec is not None and _spec.loader is not None
time_split = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(time_split)

CONFIG = json.loads(time_split.CONFIG.read_text())


def test_the_test_batches_leave_the_real_data_and_the_recalibration_is_dropped() -> None:
    cfg = time_split.split_config(CONFIG, ["by", "bz"], {"C": 0.1})
    names = {Path(f).name for f in cfg["real_data"]}
    assert "collected-2026-12-by.jsonl" not in names and "collected-2026-12-bz.jsonl" not in names
    assert len(cfg["real_data"]) == len(CONFIG["real_data"]) - 2
    assert cfg["confidence_calibration"] is None and cfg["C"] == 0.1
    # the default config itself is left alone
    assert any(Path(f).name == "collected-2026-12-by.jsonl" for f in CONFIG["real_data"])


def test_a_batch_the_config_does_not_train_on_or_an_unknown_field_is_refused() -> None:
    with pytest.raises(SystemExit, match=r"collected-2026-12-zz\.jsonl"):
        time_split.split_config(CONFIG, ["zz"], {})
    with pytest.raises(SystemExit, match="real_wieght"):
        time_split.split_config(CONFIG, ["by"], {"real_wieght": 2.0})


def test_set_values_are_read_as_json_where_they_parse() -> None:
    assert time_split._value("2") == 2 and time_split._value("0.1") == 0.1
    assert time_split._value("null") is None and time_split._value("static:x") == "static:x"
