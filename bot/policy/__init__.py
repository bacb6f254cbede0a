"""The policy: rules as data. ``load_policy`` reads and validates policies/*.yaml.

The schema of every file lives here (one module per file, ``models`` for the
shared base), so the loader knows no capability; capabilities import their
section's model from here.
"""

from bot.policy.loader import PolicyError, load_policy
from bot.policy.sections import Policy

__all__ = ["Policy", "PolicyError", "load_policy"]
