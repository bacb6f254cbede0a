"""Load and validate the policy directory at start.

A bad file is refused with its path, line and reason; Firebreak does not start
on a policy it does not understand. A section whose file is absent from a
custom directory falls back to the packaged default, and says so.
"""

from __future__ import annotations

from collections.abc import Collection
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from bot import logs
from bot.policy.models import first_error
from bot.policy.sections import SECTIONS, Policy, Source
from bot.policy.yamlsrc import line_for, load_with_lines

log = logs.get(__name__)


class PolicyError(Exception):
    """One line: file:line: reason."""


def _packaged(name: str) -> tuple[str, str]:
    res = resources.files("policies").joinpath(name)
    return res.read_text(encoding="utf-8"), f"<packaged>/{name}"


def _parse(model: type[BaseModel], text: str, where: str, context: dict[str, Any]) -> tuple[BaseModel, Source]:
    try:
        data, lines = load_with_lines(text)
    except yaml.YAMLError as exc:  # its subclasses (scanner, parser, constructor errors) all mean "not YAML"
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise PolicyError(f"{where}{line}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    try:
        parsed = model.model_validate(data if data is not None else {}, context=context)
    except ValidationError as exc:
        err = first_error(exc)
        at = line_for(lines, err.loc)
        raise PolicyError(f"{where}:{at or 1}: {err.field or '(top level)'}: {err.message}") from None
    return parsed, Source(where=where, lines={".".join(str(p) for p in loc): n for loc, n in lines.items()})


def load_policy(policy_dir: Path | None = None, levers: Collection[str] | None = None) -> Policy:
    """``levers``: the catalogue's lever names (the composition root passes levers.catalogue.LEVERS);
    with them, a policy naming a lever the catalogue lacks is refused at its file and line."""
    if policy_dir is None and Path("policies").is_dir() and any(Path("policies").glob("*.yaml")):
        policy_dir = Path("policies")
    if policy_dir is not None and not policy_dir.is_dir():
        raise PolicyError(f"{policy_dir}: policy directory not found (FIREBREAK_POLICY_DIR)")
    parsed: dict[str, Any] = {}
    sources: dict[str, Source] = {}
    for section, (filename, model) in SECTIONS.items():
        path = policy_dir / filename if policy_dir else None
        if path is not None and path.is_file():
            text, where = path.read_text(encoding="utf-8"), str(path)
        else:
            if policy_dir is not None:
                log.info("policy_default", section=section, file=filename)
            text, where = _packaged(filename)
        context = {"levers": list(levers) if levers is not None else None}
        parsed[section], sources[section] = _parse(model, text, where, context)
    return Policy(**parsed, sources=sources)
