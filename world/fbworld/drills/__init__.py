"""Game-day drills for `firebreak console --drill NAME`: timelines (YAML in this package) that
degrade the demo fleet, and the runner that plays them. Pure data and timeline: what the app did
about it (the audit, the postmortem) is the console's to read (bot/console/drill.py)."""

from fbworld.drills.library import DrillError, drills, get
from fbworld.drills.model import Decision, Drill, Match, clock, seconds
from fbworld.drills.runner import DrillEvent, Runner

__all__ = ["Decision", "Drill", "DrillError", "DrillEvent", "Match", "Runner", "clock", "drills", "get", "seconds"]
