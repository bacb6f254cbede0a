"""The reference tables in docs/ are what `python -m tools.docgen` writes from the code: the lever catalogue,
the bot's Kubernetes grants, the commands and who may run them, the settings. A hand edit of a table, or a
code or policy change without regenerating, fails here, naming the section."""

from __future__ import annotations

import shutil

import pytest

from bot.policy.loader import load_policy
from levers.catalogue import LEVERS
from tools import docgen

DOCS = sorted({s.doc for s in docgen.SECTIONS})


@pytest.fixture(scope="module")
def policy():
    return load_policy(docgen.REPO / "policies", levers=list(LEVERS))


@pytest.fixture
def copy(tmp_path):
    """The docs with generated sections, copied where the test may change them."""
    for doc in DOCS:
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(docgen.REPO / doc, tmp_path / doc)
    return tmp_path


def test_every_generated_section_is_what_the_code_says(policy):
    assert docgen.differing(policy=policy) == [], "run `python -m tools.docgen` and commit the result"


def test_every_section_has_its_markers_once():
    for s in docgen.SECTIONS:
        text = (docgen.REPO / s.doc).read_text()
        assert text.count(docgen.BEGIN.format(name=s.name)) == 1, (s.doc, s.name)


def test_the_check_names_a_table_edited_by_hand(copy, policy, capsys):
    assert docgen.differing(copy, policy) == []
    levers = copy / "docs/levers.md"
    levers.write_text(levers.read_text().replace("| `kueue-hold-drain` |", "| `kueue-hold-drain-all` |", 1))
    assert docgen.differing(copy, policy) == ["docs/levers.md: levers"]
    assert docgen.main(["--check", "--out", str(copy)]) == 1
    assert "docs/levers.md: the generated section `levers` differs" in capsys.readouterr().err
    assert docgen.main(["--out", str(copy)]) == 0  # rewriting mends it
    assert docgen.differing(copy, policy) == []


def test_the_check_names_a_section_the_code_moved_away_from(copy, policy):
    """The code changes, the doc does not: a lever's roles and a command's seats in the policy."""
    levers = policy.levers.model_copy(
        update={
            "levers": {
                **policy.levers.levers,
                "kueue-hold": policy.levers.levers["kueue-hold"].model_copy(update={"roles": ["capacity"]}),
            }
        }
    )
    commands = policy.commands.model_copy(
        update={
            "commands": {
                **policy.commands.commands,
                "sev": policy.commands.commands["sev"].model_copy(update={"allowed": ["ic", "ops"]}),
            }
        }
    )
    moved = policy.model_copy(update={"levers": levers, "commands": commands})
    assert docgen.differing(copy, moved) == ["docs/levers.md: levers", "docs/commands.md: commands"]


def test_a_missing_marker_is_named(copy, policy):
    doc = copy / "docs/operating.md"
    doc.write_text(doc.read_text().replace(docgen.BEGIN.format(name="settings"), "", 1))
    assert docgen.differing(copy, policy) == ["docs/operating.md: settings"]
    with pytest.raises(docgen.GenError, match="no section `settings`"):
        docgen.written(copy, policy)
