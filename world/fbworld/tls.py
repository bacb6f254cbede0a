"""Throwaway TLS: a CA and one server certificate it signed, made with the openssl CLI.

The demo fleet's API servers speak https (kubectl sends a kubeconfig's token only over https), and
the tests reuse it for Prometheus and Redis over TLS. The key material lives in a temp dir, never
in the repo.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TLSFiles:
    """A throwaway CA and a server certificate it signed (PEM files)."""

    ca_file: Path
    cert_file: Path
    key_file: Path


def _openssl(*args: str, cwd: Path) -> None:
    res = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed ({res.returncode}):\n{res.stderr[-2000:]}")


def make_tls(directory: str | Path, host: str = "127.0.0.1", dns: tuple[str, ...] = (), days: int = 2) -> TLSFiles:
    """A CA and a server certificate for ``host`` (an IP SAN) and ``dns`` names. Blocking (openssl runs)."""
    if shutil.which("openssl") is None:
        raise RuntimeError("the openssl CLI is needed to make the demo and test servers' TLS certificates")
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
    _openssl(
        "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", str(days),
        "-subj", "/CN=firebreak test CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=d,
    )  # fmt: skip
    _openssl("req", "-new", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", f"/CN={host}", cwd=d)
    sans = ",".join([f"IP:{host}", *(f"DNS:{n}" for n in dns)])
    (d / "server.ext").write_text(
        f"subjectAltName={sans}\n"
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth\n"
        "authorityKeyIdentifier=keyid\n"
        "subjectKeyIdentifier=hash\n"
    )
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.crt", "-days", str(days), "-extfile", "server.ext",
        cwd=d,
    )  # fmt: skip
    return TLSFiles(ca_file=d / "ca.crt", cert_file=d / "server.crt", key_file=d / "server.key")
