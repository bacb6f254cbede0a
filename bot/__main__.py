import sys

from bot.cli import main

# Guarded: importing the entry point runs nothing (a tool or a spawned process may import it).
if __name__ == "__main__":
    sys.exit(main())
