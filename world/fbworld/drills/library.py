"""The drills shipped with Firebreak: one YAML file per drill in this package, checked on load."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from fbworld.drills.model import Drill

HERE = Path(__file__).resolve().parent


class DrillError(Exception):
    """An unknown drill, or a drill file that is not a valid drill (the message says which)."""


def load(path: Path) -> Drill:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        drill = Drill.model_validate(data)
    except (OSError, yaml.YAMLError) as exc:
        raise DrillError(f"drill file {path.name}: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise DrillError(f"drill file {path.name}: {where}: {first['msg']}") from None
    if drill.name != path.stem:
        raise DrillError(f"drill file {path.name}: its name is {drill.name!r}; name the file after it")
    return drill


def drills(directory: Path = HERE) -> dict[str, Drill]:
    """Every drill, by name, in the order of their files' names."""
    return {d.name: d for d in (load(p) for p in sorted(directory.glob("*.yaml")))}


def get(name: str, directory: Path = HERE) -> Drill:
    known = drills(directory)
    if name not in known:
        raise DrillError(f"unknown drill {name[:40]}; drills: {', '.join(known)}")
    return known[name]
