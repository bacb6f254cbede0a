import sys

from bot.cli import main

# Guarded: a worker process (multiprocessing's spawn, bot/audit/sign.py) imports this module too.
if __name__ == "__main__":
    sys.exit(main())
