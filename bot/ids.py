"""The shapes of Firebreak's ids and names, for every layer to check input against."""

from __future__ import annotations

import re

INCIDENT_ID = re.compile(r"^INC-[1-9][0-9]*$")
REQUEST_ID = re.compile(r"^REQ-[1-9][0-9]*$")
GRANT_ID = re.compile(r"^BG-[1-9][0-9]*$")
HANDOFF_ID = re.compile(r"^HO-[0-9]+$")
# Who Firebreak's own work (timers, repairs, the audit of a dead job) is recorded as.
SYSTEM_ACTOR = "system"
# A cell as commands name it (a Kubernetes-style label value): us-east-3.
CELL_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
