"""The policy: rules as data. ``load_policy`` reads and validates policies/*.yaml.

Names are resolved on first use so a section model (e.g. bot/approvals/policy.py) can import
the shared base in bot.policy.models without pulling in the loader, which imports every section.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.policy.loader import PolicyError, load_policy
    from bot.policy.sections import Policy

__all__ = ["Policy", "PolicyError", "load_policy"]


def __getattr__(name: str) -> Any:
    if name in ("PolicyError", "load_policy"):
        from bot.policy import loader

        return getattr(loader, name)
    if name == "Policy":
        from bot.policy.sections import Policy

        return Policy
    raise AttributeError(f"module 'bot.policy' has no attribute {name!r}")
