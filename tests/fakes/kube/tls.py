"""TLS for the fake API server: one throwaway CA and server certificate per test process.

Real API servers only speak HTTPS, and kubectl (client-go's clientcmd) sends a kubeconfig's
credentials only to an https server, so the fake serves TLS for kubectl's bearer token to reach it.
The key material is made at first use with the openssl CLI in a private temp dir, never committed.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

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


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed making the fake API server's certificate: {proc.stderr}")


def pki() -> FakePKI:
    """The process's CA and server certificate (127.0.0.1 / localhost), made on first call.
    Blocking (openssl runs): async callers use asyncio.to_thread(pki)."""
    global _made
    with _lock:
        if _made is not None:
            return _made
        if shutil.which("openssl") is None:
            raise RuntimeError("the fake API server needs the openssl CLI to make its TLS certificate")
        d = Path(tempfile.mkdtemp(prefix="fake-kube-pki-"))
        ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
        _openssl(
            "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "3650",
            "-subj", "/CN=fake-kube-ca",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            cwd=d,
        )  # fmt: skip
        (d / "server.ext").write_text(
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
            "extendedKeyUsage=serverAuth\n"
            "basicConstraints=critical,CA:FALSE\n"
            "keyUsage=critical,digitalSignature,keyEncipherment\n"
        )
        _openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=fake-kube-apiserver", cwd=d)
        _openssl(
            "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.crt", "-days", "3650", "-extfile", "server.ext",
            cwd=d,
        )  # fmt: skip
        _made = FakePKI(d, (d / "ca.crt").read_bytes())
        return _made


def made() -> FakePKI | None:
    """The PKI if a cluster already made it (kubeconfig writing must not block to make one)."""
    return _made
