"""Every comms command and timer, imported once (bot/commands.py lists this module)."""
from bot.comms import buttons, handoffs, nodes, reminders, timers, update, watch  # noqa: F401
