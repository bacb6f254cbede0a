"""For the "every lever" tests that keep per-lever data by hand (a pull's command, target, fixtures):
the catalogue (levers/catalogue LEVERS) is what "every" means, so a lever added there and not to a
test's list fails that test's coverage check instead of being left out silently."""

from __future__ import annotations

from collections.abc import Iterable

from levers.catalogue import LEVERS


def lever_of(command: str) -> str:
    """The lever a `lever <name> …` command pulls."""
    word, name, *_ = command.split()
    assert word == "lever", command
    return name


def assert_every_lever(names: Iterable[str], where: str) -> None:
    """`names` (the levers a test's list pulls) are exactly the catalogue's."""
    listed, catalogue = set(names), set(LEVERS)
    assert listed == catalogue, (
        f"{where}: no entry for {sorted(catalogue - listed)}; not in the catalogue: {sorted(listed - catalogue)}"
    )
