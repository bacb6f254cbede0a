"""`firebreak console`: the real app against an embedded Slack emulator, in a terminal.

Its world (the Slack emulator, the demo fleet, the drills) is the firebreak-world distribution
(world/, import package fbworld), which the product's wheel and image do not carry: bot.cli checks
it is installed (``world_installed``) before it imports bot.console.main, which needs it.
"""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

LOG_PATH = Path(tempfile.gettempdir()) / "firebreak-console.log"  # the app's log while the console runs
WORLD_MISSING = (
    "`firebreak console` needs Firebreak's simulated world (the firebreak-world package), which is not "
    "installed: run `./firebreak console` from a checkout (it installs it), or `pip install ./world`"
)


def world_installed() -> bool:
    return importlib.util.find_spec("fbworld") is not None
