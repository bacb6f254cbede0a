"""Kinds whose controllers are not part of the build (Cilium's and Calico's network policies, Flux's
Kustomization and HelmRelease), served by the emulated cells for the tests that read them: their
upstream group, version, names and scope, with an open schema (tests/realkube/test_cni_flux_real.py
serves the upstream files to the real API server)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from fbworld.kube.server import default_crd_dir


def crd(group: str, version: str, kind: str, plural: str, scope: str) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
            "scope": scope,
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }


# cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2; projectcalico/calico libcalico-go/config/crd;
# fluxcd/kustomize-controller api/v1, fluxcd/helm-controller api/v2.
CILIUM = [
    crd("cilium.io", "v2", "CiliumNetworkPolicy", "ciliumnetworkpolicies", "Namespaced"),
    crd("cilium.io", "v2", "CiliumClusterwideNetworkPolicy", "ciliumclusterwidenetworkpolicies", "Cluster"),
]
CALICO = [crd("crd.projectcalico.org", "v1", "GlobalNetworkPolicy", "globalnetworkpolicies", "Cluster")]
FLUX = [
    crd("kustomize.toolkit.fluxcd.io", "v1", "Kustomization", "kustomizations", "Namespaced"),
    crd("helm.toolkit.fluxcd.io", "v2", "HelmRelease", "helmreleases", "Namespaced"),
]


def serve(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory, crds: list[dict]) -> None:
    """Cells built after this serve the vendored CRDs and ``crds`` ($FIREBREAK_CRD_DIR)."""
    d = tmp_path_factory.mktemp("crds")
    for f in default_crd_dir().glob("*.y*ml"):
        shutil.copy(f, d / f.name)
    for c in crds:
        (d / f"{c['metadata']['name']}.yaml").write_text(yaml.safe_dump(c))
    monkeypatch.setenv("FIREBREAK_CRD_DIR", str(Path(d)))
