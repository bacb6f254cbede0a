"""TLS for the fake API server: one throwaway CA and server certificate per test process.

Real API servers only speak HTTPS, and kubectl (client-go's clientcmd) sends a kubeconfig's
credentials only to an https server, so the fake serves TLS for kubectl's bearer token to reach it.
The key material is made at first use with the openssl CLI in a private temp dir, never committed.
"""

from __future__ import annotations

import shutil
import ssl
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from fbworld.tls import make_tls

_lock = threading.Lock()
_made: FakePKI | None = None


@dataclass(frozen=True)
class FakePKI:
    dir: Path
    ca_pem: bytes

    @property
    def ca_file(self) -> Path:
        return self.dir / "ca.crt"

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(self.dir / "server.crt", self.dir / "server.key")
        return ctx

    def client_context(self) -> ssl.SSLContext:
        """For raw HTTP clients in tests (aiohttp): trusts the fake's CA only."""
        return ssl.create_default_context(cadata=self.ca_pem.decode())


def pki() -> FakePKI:
    """The process's CA and server certificate (127.0.0.1 / localhost), made on first call.
    Blocking (openssl runs): async callers use asyncio.to_thread(pki)."""
    global _made
    with _lock:
        if _made is None:
            files = make_tls(tempfile.mkdtemp(prefix="fake-kube-pki-"), dns=("localhost",), days=3650)
            _made = FakePKI(files.ca_file.parent, files.ca_file.read_bytes())
        return _made


def made() -> FakePKI | None:
    """The PKI if a cluster already made it (kubeconfig writing must not block to make one)."""
    return _made


def discard() -> None:
    """Remove the CA and server key (a process that made them for the demo fleet, at exit). The
    next cluster started makes new ones."""
    global _made
    with _lock:
        if _made is not None:
            shutil.rmtree(_made.dir, ignore_errors=True)
            _made = None
