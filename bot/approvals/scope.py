"""Break-glass scope: which of the bot's own levers a grant covers, and where.

Grammar: a lever name, comma-separated lever names,
`cell:<cell>` (every lever in that cell) or `fleet` (levers on the fleet
context). Named levers cover every cell but never the fleet context: fleet
state needs `fleet` said out loud. Only names in the lever catalogue are
accepted, so a grant can never reach past what Firebreak itself can do.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.chat import quote
from bot.ids import CELL_NAME

FLEET = "fleet"


class ScopeError(ValueError):
    pass


@dataclass(frozen=True)
class Scope:
    levers: tuple[str, ...] = ()
    cell: str | None = None
    fleet: bool = False

    def covers(self, lever: str, cell: str) -> bool:
        if self.fleet:
            return cell == FLEET
        if self.cell is not None:
            return cell == self.cell
        return lever in self.levers and cell != FLEET

    def describe(self) -> str:
        if self.fleet:
            return "every lever on the fleet context"
        if self.cell is not None:
            return f"every lever in cell {self.cell}"
        return ", ".join(self.levers) + " in any cell (not the fleet context)"

    def text(self) -> str:
        """The canonical scope string (stored, and parsed back by `parse`)."""
        if self.fleet:
            return FLEET
        if self.cell is not None:
            return f"cell:{self.cell}"
        return ",".join(self.levers)


def parse(text: str, catalogue: list[str]) -> Scope:
    t = text.strip().lower()
    if t == FLEET:
        return Scope(fleet=True)
    if t.startswith("cell:"):
        cell = t[5:]
        if not CELL_NAME.fullmatch(cell):
            raise ScopeError(f"`{quote(cell[:40])}` is not a cell name (like `cell:us-east-3`).")
        return Scope(cell=cell)
    names = [n.strip() for n in t.split(",") if n.strip()]
    unknown = [n for n in names if n not in catalogue]
    if not names or unknown:
        bad = ", ".join(f"`{quote(n[:40])}`" for n in unknown) or "nothing"
        raise ScopeError(
            f"{bad} is not a Firebreak lever. Scope is a lever ({', '.join(sorted(catalogue))}), "
            "several joined by commas, `cell:<cell>` or `fleet`."
        )
    return Scope(levers=tuple(dict.fromkeys(names)))
