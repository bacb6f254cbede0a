"""Issue 36 item 5: a clone carries every reference it needs. The product's contract is kept outside
the repository; what the code relies on is stated in docs/, and comments, docstrings, tests and docs
point there, never to a document a newcomer does not have. The same holds for the source documents the
product was first written from ("the seeds"): a fact taken from them is stated in docs/ with its origin
named in general terms (NVIDIA's XID catalog, Cilium's deny policies)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]

# Spelled in pieces so this file does not match itself.
_DOC = "DES" + "IGN"
OUTSIDE = re.compile(
    rf"\b{_DOC}(\.md|\b)"  # the contract's file name, or its sections ("<name> §11")
    r"|(?i:\bdesign[ _]doc(ument)?s?\b)"  # "the design document"
    r"|(?i:(?<![a-z])the[ _]design(s|'s)?(?![a-z]))"  # "the design's six streams", test_…_the_design
)
# The source documents, by the name they were handed over under; the code's own seeding ("seeded",
# `seed_cell`, `seeds()`) does not match.
SEEDS = re.compile(
    r"(?i:(?<![a-z])the[ _]seeds?(?![a-z]))"  # "the seeds' trap", "the seed's kubectl line", test_the_seeds_…
    r"|(?i:(?<![a-z_])seeds?'(s\b|\s))"  # "seed's", "seeds' quarantine"
    r"|(?i:(?<![a-z_])seeds_)"  # seeds_ccnp()
    r"|(?i:shared/seeds)"  # their directory
)


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p]


def test_no_tracked_file_points_outside_the_repository():
    found = []
    for rel in _tracked():
        path = REPO / rel
        if not path.is_file() or path == HERE:  # deleted, not yet committed; or this file's own examples
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):  # binary files say nothing to a reader
            continue
        lower = text.lower()
        if "design" not in lower and "seed" not in lower:  # the patterns' literals: most files stop here
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line) or SEEDS.search(line):
                found.append(f"{rel}:{n}: {line.strip()[:100]}")
    assert not found, "point to docs/ instead:\n" + "\n".join(found)


def test_the_pattern_knows_what_it_looks_for():
    for said in (
        f"{_DOC}.md section 4",
        f"({_DOC} §11)",
        f"{_DOC}'s shape",
        "the design document",
        "the design's six streams",
        "def test_defaults_are_the_designs():",
    ):
        assert OUTSIDE.search(said), said
    for fine in ("refused by design", "the purpose it was designed for", "this design is not final"):
        assert not OUTSIDE.search(fine), fine


def test_the_seeds_pattern_knows_what_it_looks_for():
    for said in (
        "The seeds' trap: stream 6",
        "the seed's kubectl line",
        "Release incident from the seeds:",
        "def test_the_seeds_clusterwide_policy():",
        "cells.east3.put(seeds_ccnp())",
        "/work/shared/seeds/oncall-narrative.txt",
    ):
        assert SEEDS.search(said), said
    for fine in (
        "the seeded cell has 10 GPU nodes",
        "seed_cell(east3)",
        "objs = seeds()",
        "the next test's seeds are new objects",
        "print(r['seed'])",
        "random.seed(0)",
    ):
        assert not SEEDS.search(fine), fine
