from bot.policy.loader import PolicyError, load_policy
from bot.policy.sections import Policy

__all__ = ["Policy", "PolicyError", "load_policy"]
