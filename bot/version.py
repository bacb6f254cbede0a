"""Firebreak's version and the User-Agent its clients send (Prometheus, Kubernetes)."""

from __future__ import annotations

import functools
from importlib import metadata


@functools.cache
def version() -> str:
    try:
        return metadata.version("firebreak")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def user_agent() -> str:
    """`firebreak/<version>`: how an API server's audit log or a proxy's access log names us."""
    return f"firebreak/{version()}"
