"""Throwaway TLS for test servers: the demo fleet's openssl helper, shared.

Used by the fake API server (kubectl sends a kubeconfig's token only over https), by Prometheus
served over HTTPS and by Redis over TLS. The key material lives in a temp dir, never in the repo.
"""

from bot.demo.kube.pki import TLSFiles, make_tls

__all__ = ["TLSFiles", "make_tls"]
