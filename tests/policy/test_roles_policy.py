"""policies/roles.yaml: who may hold each seat. The packaged default is docs/security-model.md's; a bad entry
is refused at load with its file and line (a group Slack doesn't know: at start, tests/levers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.policy import PolicyError, load_policy
from bot.policy.eligible import RolesPolicy
from bot.policy.roles import ROLES


def test_every_seat_has_an_entry_and_the_packaged_default_is_the_documented_one():
    # `publish` is no role anyone holds: who may speak to the stakeholder channel (docs/security-model.md).
    assert set(RolesPolicy.model_fields) == {*ROLES, "publish"}
    roles = load_policy().roles
    assert {seat: roles.of(seat) for seat in ROLES} == {
        "ic": ["@ml-ic", "oncall"],
        "ops": ["@ml-oncall"],
        "comms": ["anyone"],
        "scribe": ["anyone"],
        "model": ["@ml-model-owners"],
        "capacity": ["@ml-capacity"],
        "security": ["@ml-security"],
    }
    assert roles.of("publish") == ["@ml-ic", "@ml-comms", "oncall"]
    assert RolesPolicy() == roles  # a seat left out of a custom file keeps its packaged default


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ('ops: ["@ml-oncall", "ml-capacity"]\n', 1, 'a user group is written with its @ and quoted: "@ml-capacity"'),
        ("ic: [oncall]\nsecurity: [anyone, U0123ABCD]\n", 2, "`anyone` stands alone"),
        ("ic: [oncall]\nsecruity: [U0123ABCD]\n", 2, "secruity: Extra inputs are not permitted"),
        ("ops: []\n", 1, "at least 1 item"),
        ('ops: ["@ml-oncall", "@ml-oncall"]\n', 1, "an entry is listed twice"),
    ],
)
def test_a_bad_entry_is_refused_with_file_and_line(tmp_path: Path, text: str, line: int, says: str):
    (tmp_path / "roles.yaml").write_text(text)
    with pytest.raises(PolicyError) as got:
        load_policy(tmp_path)
    assert str(got.value).startswith(f"{tmp_path}/roles.yaml:{line}: "), got.value
    assert says in str(got.value), got.value


def test_an_unquoted_handle_is_not_yaml_and_says_where(tmp_path: Path):
    (tmp_path / "roles.yaml").write_text("ic: [oncall]\nops: [@ml-oncall]\n")
    with pytest.raises(PolicyError, match=r"roles\.yaml:2: not valid YAML"):
        load_policy(tmp_path)
