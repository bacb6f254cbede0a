"""The console's `audit`: every entry on one line, then the hash-chain check."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from bot.audit import verify_entries
from bot.console.people import Directory
from bot.core.services import Services
from bot.ids import SYSTEM_ACTOR


async def show(svc: Services, out: Callable[[str], None], people: Directory) -> bool:
    entries = [e async for e in svc.audit.entries()]
    for e in entries:
        detail = e.get("detail") or {}
        brief = ", ".join(f"{k}={_short(v)}" for k, v in detail.items() if k not in ("source",))
        actor = people.name(e.get("actor", "")) if e.get("actor") != SYSTEM_ACTOR else SYSTEM_ACTOR
        out(f"  {e.get('seq')}  {e.get('ts')}  {e.get('incident') or '-'}  {actor}  {e.get('action')}  {brief}")
    bad = verify_entries(entries)
    out(f"  audit chain OK ({len(entries)} entries)" if bad is None else f"  audit chain BROKEN at seq {bad}")
    return bad is None


def _short(v: Any) -> str:
    s = json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v
    return s if len(s) <= 60 else s[:57] + "…"
