"""Each secret-masking rule on its own: a value only that rule recognises, in a neutral line.

The corpus test (``test_secrets_corpus.py``) plants secrets in realistic positions, where
several rules overlap (``GITHUB_TOKEN=ghp_...`` is masked by the token rule *and* by the
``name=value`` rule), so removing one rule can go unnoticed there. Here every line carries
no secret-sounding name, no ``name=value`` and no e-mail shape: if the rule that owns the
value stops working, the value reaches the output and the test names the rule.
"""

from __future__ import annotations

import pytest

from denpex_ml.logs import Masker
from denpex_ml.logs.secret_rules import mask_secrets

KEY_BODY = ("MIIEowIBAAKCAQEAx7Qk3ZpLq9VbT2xYw", "q8Zr2M1p0N5sT4uV7wX9yA3bC6dE8fG0h")

#: rule -> (input line(s), exact masked output, values that must not survive)
CASES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "private-key (block)": (
        "key dump:\n-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(KEY_BODY) + "\n-----END RSA PRIVATE KEY-----\nnext",
        "key dump:\n-----BEGIN RSA PRIVATE KEY-----\n<masked:private-key>\n<masked:private-key>\n"
        "-----END RSA PRIVATE KEY-----\nnext",
        KEY_BODY,
    ),
    "private-key (one line)": (
        "x -----BEGIN OPENSSH PRIVATE KEY-----b3BlbnNzaC1rZXktdjEAAAAA-----END OPENSSH PRIVATE KEY----- y",
        "x <masked:private-key> y",
        ("b3BlbnNzaC1rZXktdjEAAAAA",),
    ),
    "github-token": (
        "pushed with ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ ok",
        "pushed with <masked:token> ok",
        ("ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ",),
    ),
    "aws-key-id": (
        "using AKIAZ7Q3EXAMPLE4XY2W for s3",
        "using <masked:token> for s3",
        ("AKIAZ7Q3EXAMPLE4XY2W",),
    ),
    "openai-like-key": (
        "client sk-proj4Ab8Cd2Ef6Gh0Ij4Kl8Mn2Op rejected",
        "client <masked:token> rejected",
        ("sk-proj4Ab8Cd2Ef6Gh0Ij4Kl8Mn2Op",),
    ),
    "slack-token": (
        "posting via xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp ok",
        "posting via <masked:token> ok",
        ("xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp",),
    ),
    "jwt": (
        "payload eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U seen",
        "payload <masked:token> seen",
        ("eyJhbGciOiJIUzI1NiJ9", "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"),
    ),
    "bearer": (
        "sent Bearer Zm9vYmFyYmF6cXV4MTIzNDU2 to the proxy",
        "sent Bearer <masked:token> to the proxy",
        ("Zm9vYmFyYmF6cXV4MTIzNDU2",),
    ),
    "url-credentials": (
        # the password alone would look like an e-mail (hunter2pass@example.com); the user would not
        "fetching https://alice:hunter2pass@example.com/repo.git now",
        "fetching https://<masked:user>:<masked:secret>@example.com/repo.git now",
        ("alice", "hunter2pass"),
    ),
    "windows-user": (
        r"File C:\Users\jdoe\train.py, line 3",
        r"File C:\Users\user\train.py, line 3",
        ("jdoe",),
    ),
}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_each_rule_masks_its_own_secret(rule: str) -> None:
    text, expected, secrets = CASES[rule]
    assert mask_secrets(text) == expected
    # the per-job masker of ingestion (rule gates, line detector, pseudonyms on top)
    masked = Masker().mask(text)
    assert not [s for s in secrets if s in masked], masked
    lines = Masker().mask_lines(text.split("\n"))
    assert not [s for s in secrets if any(s in line for line in lines)], lines


@pytest.mark.parametrize("rule", sorted(CASES))
def test_each_rule_masks_inside_a_larger_log(rule: str) -> None:
    """The line detector must flag the secret's line among many harmless ones."""
    text, _expected, secrets = CASES[rule]
    noise = [f"[rank0]: step {i} loss 2.{i:02d}" for i in range(200)]
    log = "\n".join([*noise[:100], text, *noise[100:]])
    masked = Masker().mask(log)
    assert not [s for s in secrets if s in masked]
    assert masked.count("\n") == log.count("\n")


def test_neutral_lines_are_left_alone() -> None:
    """The cases above are only meaningful if masking does not rewrite everything."""
    line = "[rank3]: step 12 loss 2.31 lr 3e-4 tokens/s 41000"
    assert mask_secrets(line) == line and Masker().mask(line) == line
