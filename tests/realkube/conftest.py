"""The real kube-apiserver of the session (tests/support/kube_apiserver.py)."""

from tests.support.kube_apiserver import kube_apiserver  # noqa: F401 (fixture)
