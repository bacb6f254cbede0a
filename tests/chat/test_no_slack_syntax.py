"""The domain names people; the chat port renders them (issue 36, item 8).

No domain module spells the chat's markup (``<@U1>``, ``<!here>``, ``<#C1>``): it names a person
with ``bot.chat.person``, a channel with ``channel_ref``, and parses a typed mention with
``person_of``. The domain is what the import contract "The domain knows nothing of Slack or the
console" lists (pyproject.toml), less bot.chat, the port whose codec spells it.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from bot.chat import HERE, channel_ref, name_people, person, person_of, quote

ROOT = Path(__file__).resolve().parents[2]
# Markup as the chat parses it; a usage placeholder (`<@user>`, `<@self>`) and a regex lookbehind
# (`(?<![\w-])`) are not markup.
MARKUP = re.compile(r"<@(?![a-z]+>)|<![a-z{]|<#[A-Z{]")


def _domain_files() -> list[Path]:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (domain,) = [c for c in contracts if c["name"] == "The domain knows nothing of Slack or the console"]
    files: list[Path] = []
    for module in domain["source_modules"]:
        if module == "bot.chat":
            continue
        base = ROOT.joinpath(*module.split("."))
        files.extend(sorted(base.rglob("*.py")) if base.is_dir() else [base.with_suffix(".py")])
    return files


def test_the_domain_spells_no_chat_markup() -> None:
    files = _domain_files()
    assert len(files) > 100  # the contract's modules were found, not an empty list
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in files
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if MARKUP.search(line)
    ]
    assert not found, "name people with bot.chat.person (channels: channel_ref, a ping: HERE):\n" + "\n".join(found)


def test_the_codec_round_trips_a_person() -> None:
    assert person_of(person("U123")) == "U123"
    assert person_of("<@U123|alex>") == "U123"  # a person picked in the composer, with its label
    assert person_of("&lt;@U123&gt;") is None  # typed as text: no one is picked
    assert person_of("U123") is None
    # A reposted update keeps the person it names active, and they read as @id in a document.
    said = quote(f"{person('U1')} is rolling back")
    assert said == f"{person('U1')} is rolling back"
    assert name_people(said, lambda u: f"@{u}") == "@U1 is rolling back"
    assert channel_ref("C1") != "C1" and HERE
