"""policies/oncall.yaml: cell -> the on-call's Slack user id, else `default`; validated at start."""

from __future__ import annotations

import pytest

from bot.policy import PolicyError, load_policy
from tests.support.signals import policy_dir


def test_the_packaged_default_has_nobody_on_call():
    oncall = load_policy().oncall
    assert oncall.ic_for("us-east-3") is None


def test_a_cell_gets_its_own_on_call_else_the_default(tmp_path):
    d = policy_dir(tmp_path)
    (d / "oncall.yaml").write_text("default: UDEFAULT1\ncells:\n  us-east-1: UONE\n  us-east-2: null\n")
    oncall = load_policy(d).oncall
    assert oncall.ic_for("us-east-1") == "UONE"
    assert oncall.ic_for("us-east-2") is None  # listed as nobody: the default does not fill it
    assert oncall.ic_for("eu-west-1") == "UDEFAULT1"


@pytest.mark.parametrize(
    "text, says",
    [
        ("cells:\n  us-east-1: alice\n", "oncall.yaml:2: cells.us-east-1: 'alice' is not a Slack user id"),
        ("default: '@bob'\n", "oncall.yaml:1: default: '@bob' is not a Slack user id"),
        ("cells:\n  us-east-1: UONE\n  US East: UONE\n", "oncall.yaml:3: cells.US East.[key]: 'US East' is not a cell"),
        ("oncall: {}\n", "oncall.yaml:1: oncall: Extra inputs are not permitted"),
    ],
)
def test_a_bad_oncall_file_is_refused_with_its_line(tmp_path, text, says):
    d = policy_dir(tmp_path)
    (d / "oncall.yaml").write_text(text)
    with pytest.raises(PolicyError) as e:
        load_policy(d)
    assert says in str(e.value), str(e.value)
