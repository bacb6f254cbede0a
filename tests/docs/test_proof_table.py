"""docs/proof.md's table (which behaviour is proven on what) is true of the tests: every test it cites
exists; a row proven on a real controller cites tests that run that controller at the version
.ci/controllers pins; a stand-in row names the upstream source its stand-in follows, and the stand-in
says so; a real-API-server row's tests run on the real server; and every lever in the catalogue has
at least one row proven on more than the emulator."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from levers.catalogue import LEVERS
from tests.support.controllers import WRAPPERS, _env, _version

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "proof.md"
KINDS = ("real controller", "real API server", "stand-in", "emulator only")
REF = re.compile(r"`([\w/.-]+\.py)::(\w+)`")
CODE = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Row:
    behaviour: str
    kind: str
    by: str
    tests: tuple[tuple[str, str], ...]


def rows() -> list[Row]:
    """The table's rows: `| behaviour | proven on | by | tests |` under the header, in order."""
    out: list[Row] = []
    header = False
    for line in DOC.read_text().splitlines():
        if not line.startswith("|"):
            header = False if out else header
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[:2] == ["behaviour", "proven on"]:
            header = True
            continue
        if not header or set(cells[0]) <= {"-", ":"}:
            continue
        assert len(cells) == 4, f"docs/proof.md: a row needs four cells: {line}"
        out.append(Row(cells[0], cells[1], cells[2], tuple(REF.findall(cells[3]))))
    return out


@cache
def module(path: str) -> ast.Module:
    return ast.parse((REPO / path).read_text())


def function(path: str, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    for node in module(path).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    raise AssertionError(f"docs/proof.md cites {path}::{name}, which is not a test there")


def fixtures(path: str, name: str) -> set[str]:
    fn = function(path, name)
    return {a.arg for a in fn.args.args}


def runs_controller(path: str, name: str, controller: str) -> bool:
    """The cited test runs this real controller: its module uses the controller's fixture module
    (tests/support/<name>_controller.py), or it takes the realkube suite's `controllers`, which
    tests/realkube/conftest.py starts from that module."""
    own = f"tests.support.{controller.split('-')[0]}_controller"
    if own in (REPO / path).read_text():
        return True
    conftest = (REPO / "tests" / "realkube" / "conftest.py").read_text()
    return "controllers" in fixtures(path, name) and own in conftest


TABLE = rows()


def test_the_table_has_rows_of_known_kinds_each_with_a_test():
    assert len(TABLE) >= 10
    for row in TABLE:
        assert row.kind in KINDS, f"{row.behaviour}: '{row.kind}' is not one of {KINDS}"
        assert row.tests, f"{row.behaviour}: no test cited (`path.py::test_name`)"


@pytest.mark.parametrize("row", TABLE, ids=lambda r: r.behaviour[:60])
def test_each_row_is_what_its_tests_run_on(row: Row):
    for path, name in row.tests:
        function(path, name)  # exists
        if row.kind == "real controller":
            controller, _, version = row.by.partition(" ")
            assert (WRAPPERS / controller / "controller.env").is_file(), f"{row.by}: not in .ci/controllers"
            assert version == _version(controller, _env(controller)["MODULE"]), (
                f"{row.behaviour}: the table says {row.by}, .ci/controllers/{controller}/go.mod pins another"
            )
            assert runs_controller(path, name, controller), f"{path}::{name} does not run the real {controller}"
        elif row.kind == "real API server":
            assert path.startswith("tests/realkube/"), f"{path}::{name} is not on the real API server"
        if row.kind == "stand-in":
            standin, upstream = CODE.findall(row.by)[:2]
            text = (REPO / standin).read_text()
            assert upstream in text, f"{standin} does not name the upstream source it follows ({upstream})"


def test_every_lever_is_proven_on_more_than_the_emulator():
    proven = {
        name
        for row in TABLE
        if row.kind != "emulator only"
        for name in LEVERS
        if re.search(rf"`{re.escape(name)}`", row.behaviour)
    }
    assert set(LEVERS) <= proven, f"levers with no row above the emulator: {sorted(set(LEVERS) - proven)}"
