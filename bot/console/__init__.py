"""`firebreak console`: the real app against an embedded Slack emulator, in a terminal."""
