"""A kubeconfig exec credential plugin for the tests, run by the client the way kubectl runs
`aws eks get-token` or `gke-gcloud-auth-plugin`: it prints an ExecCredential whose token is the
current content of TOKEN_FILE, valid for TTL seconds (negative: already expired).

    exec_plugin.py TOKEN_FILE [TTL]

Every run appends a line to TOKEN_FILE.runs (so a test can count runs). While TOKEN_FILE.fail
exists, the plugin fails the way a real one does: its content on stderr, exit status 1.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path


def main() -> int:
    token_file = Path(sys.argv[1])
    ttl = float(sys.argv[2]) if len(sys.argv) > 2 else 3600.0
    with open(f"{token_file}.runs", "a", encoding="utf-8") as runs:
        runs.write("run\n")
    fail = Path(f"{token_file}.fail")
    if fail.exists():
        sys.stderr.write(fail.read_text(encoding="utf-8"))
        return 1
    # The client says which ExecCredential version it wants; the answer must carry the same one.
    info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
    expires = datetime.now(UTC) + timedelta(seconds=ttl)
    cred = {
        "apiVersion": info["apiVersion"],
        "kind": "ExecCredential",
        "status": {
            "token": token_file.read_text(encoding="utf-8").strip(),
            "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
    }
    print(json.dumps(cred))
    return 0


if __name__ == "__main__":
    sys.exit(main())
