"""Resource type registry: built-in kinds plus every CRD found in the CRD dir.

The registry is the single source of truth for routing, discovery, scope,
subresources, schemas and version conversion.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class ScaleSpec:
    """Where a kind keeps its replica counts (CRD subresources.scale shape)."""

    spec_replicas_path: str
    status_replicas_path: str
    label_selector_path: str | None = None


@dataclass
class ResourceType:
    group: str  # "" for the core group
    kind: str
    plural: str
    singular: str
    namespaced: bool
    versions: list[str]  # served versions
    storage_version: str
    short_names: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    # version -> openAPIV3Schema; built-ins have no schema (light checks instead)
    schemas: dict[str, dict | None] = field(default_factory=dict)
    has_status: bool = False
    scale: ScaleSpec | None = None
    builtin: bool = False

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def group_resource(self) -> str:
        """`plural.group` as used in real error messages (`pods` for core)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    def names(self) -> set[str]:
        """Every name kubectl-ish callers may use to refer to this kind."""
        return {self.kind.lower(), self.plural, self.singular, *self.short_names}


_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(v: str) -> tuple:
    """Kubernetes version ordering: GA > beta > alpha, higher numbers first."""
    m = _VERSION_RE.match(v)
    if not m:
        return (0, 0, 0, v)
    major, level, minor = int(m.group(1)), m.group(2), int(m.group(3) or 0)
    rank = {None: 3, "beta": 2, "alpha": 1}[level]
    return (rank, major, minor, v)


def _builtin_types() -> list[ResourceType]:
    def core(kind, plural, namespaced, short=(), status=True, scale=None, group="", version="v1"):
        return ResourceType(
            group=group,
            kind=kind,
            plural=plural,
            singular=kind.lower(),
            namespaced=namespaced,
            versions=[version],
            storage_version=version,
            short_names=list(short),
            schemas={version: None},
            has_status=status,
            scale=scale,
            builtin=True,
        )

    return [
        core("Node", "nodes", False, short=["no"]),
        core("Namespace", "namespaces", False, short=["ns"]),
        core("Pod", "pods", True, short=["po"]),
        core("ConfigMap", "configmaps", True, short=["cm"], status=False),
        core("Event", "events", True, short=["ev"], status=False),  # core/v1 (kubectl get events)
        core(
            "Deployment",
            "deployments",
            True,
            short=["deploy"],
            group="apps",
            scale=ScaleSpec(".spec.replicas", ".status.replicas", None),
        ),
        # Argo Rollouts runs its pods through ReplicaSets it owns (one per pod-template hash).
        core(
            "ReplicaSet",
            "replicasets",
            True,
            short=["rs"],
            group="apps",
            scale=ScaleSpec(".spec.replicas", ".status.replicas", None),
        ),
        core(
            "StatefulSet",
            "statefulsets",
            True,
            short=["sts"],
            group="apps",
            scale=ScaleSpec(".spec.replicas", ".status.replicas", None),
        ),
        # KEDA runs a ScaledObject through an HPA it owns (keda-hpa-<name>) and deletes it while paused.
        core(
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            True,
            short=["hpa"],
            group="autoscaling",
            version="v2",
        ),
        # The JobSet controller runs each replicated job as a batch/v1 Job (label jobset-name,
        # restart-attempt): a gang's last start is its current attempt's Jobs' status.startTime.
        core("Job", "jobs", True, group="batch"),
        # What sandbox-quarantine's label relies on: a deny-all policy selecting it. No status in v1.
        core("NetworkPolicy", "networkpolicies", True, short=["netpol"], status=False, group="networking.k8s.io"),
    ]


# The C loader is ~10x faster on these multi-thousand-line CRDs.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_crd(path: Path) -> ResourceType | None:
    st = path.stat()
    return _load_crd_cached(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=64)
def _load_crd_cached(path: str, _mtime: int, _size: int) -> ResourceType | None:
    # Cached across clusters; ResourceType objects are treated as read-only.
    docs = [d for d in yaml.load_all(Path(path).read_text(), Loader=_Loader) if d]
    crd = next((d for d in docs if d.get("kind") == "CustomResourceDefinition"), None)
    if crd is None:
        return None
    spec = crd["spec"]
    names = spec["names"]
    served = [v for v in spec["versions"] if v.get("served", True)]
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    # Subresources are per version in apiextensions/v1; the fake keeps one set
    # per kind (all upstream CRDs here declare the same set on every version).
    subs: dict[str, Any] = {}
    for v in served:
        subs.update(v.get("subresources") or {})
    scale = None
    if "scale" in subs:
        s = subs["scale"]
        scale = ScaleSpec(s["specReplicasPath"], s["statusReplicasPath"], s.get("labelSelectorPath"))
    return ResourceType(
        group=spec["group"],
        kind=names["kind"],
        plural=names["plural"],
        singular=names.get("singular") or names["kind"].lower(),
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        versions=[v["name"] for v in served],
        storage_version=storage,
        short_names=list(names.get("shortNames") or []),
        categories=list(names.get("categories") or []),
        schemas={v["name"]: (v.get("schema") or {}).get("openAPIV3Schema") for v in served},
        has_status="status" in subs,
        scale=scale,
    )


# Per-kind conversion hooks: (group, kind) -> fn(obj, from_version, to_version).
# Real clusters use conversion webhooks; the fake only knows trivial renames.
def _kueue_cq(obj: dict, src: str, dst: str) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if src == "v1beta1" and dst != "v1beta1" and "cohort" in spec:
        spec["cohortName"] = spec.pop("cohort")
    elif dst == "v1beta1" and src != "v1beta1" and "cohortName" in spec:
        spec["cohort"] = spec.pop("cohortName")


CONVERSIONS: dict[tuple[str, str], Callable[[dict, str, str], None]] = {
    ("kueue.x-k8s.io", "ClusterQueue"): _kueue_cq,
}


def restrict_versions(rt: ResourceType, versions: Sequence[str]) -> ResourceType:
    """A copy of a CRD's type serving only `versions` (what an older or newer operator release installs).
    The storage version stays unless it is no longer served; then the newest served one stores."""
    unknown = [v for v in versions if v not in rt.versions]
    if unknown:
        raise ValueError(f"{rt.plural}.{rt.group} has no version(s) {unknown}; its CRD defines {rt.versions}")
    served = [v for v in rt.versions if v in versions]
    storage = rt.storage_version if rt.storage_version in served else max(served, key=version_priority)
    return dataclasses.replace(
        rt, versions=served, storage_version=storage, schemas={v: rt.schemas.get(v) for v in served}
    )


class Registry:
    def __init__(self, crd_dir: Path | None, served: Mapping[str, Sequence[str]] | None = None):
        """served: {"plural.group": versions} limits a CRD to those versions; an empty list leaves
        the CRD out entirely (the operator is not installed)."""
        self.types: list[ResourceType] = _builtin_types()
        wanted = dict(served or {})
        if crd_dir is not None and crd_dir.is_dir():
            for p in sorted(crd_dir.glob("*.y*ml")):
                rt = load_crd(p)
                if rt is None:
                    continue
                key = f"{rt.plural}.{rt.group}"
                if key in wanted:
                    versions = wanted.pop(key)
                    if not versions:
                        continue
                    rt = restrict_versions(rt, versions)
                self.types.append(rt)
        if wanted:
            raise ValueError(f"served names CRDs this fake does not have: {sorted(wanted)}")

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        for rt in self.types:
            if rt.group == group and rt.plural == plural and version in rt.versions:
                return rt
        return None

    def by_name(self, name: str) -> ResourceType:
        """Resolve 'ClusterQueue', 'clusterqueues', 'cq' or 'clusterqueues.kueue.x-k8s.io'."""
        key = name.lower()
        base, _, group = key.partition(".")
        for rt in self.types:
            if key in rt.names() or (group and base in rt.names() and rt.group == group):
                return rt
        raise KeyError(f"unknown resource {name!r}")

    def groups(self) -> dict[str, list[str]]:
        """group -> served versions, most preferred first."""
        out: dict[str, set[str]] = {}
        for rt in self.types:
            out.setdefault(rt.group, set()).update(rt.versions)
        return {g: sorted(vs, key=version_priority, reverse=True) for g, vs in out.items()}

    def convert(self, rt: ResourceType, obj: dict, to_version: str) -> dict:
        obj = copy.deepcopy(obj)
        src = obj.get("apiVersion", rt.api_version(rt.storage_version)).rpartition("/")[2]
        if src != to_version:
            hook = CONVERSIONS.get((rt.group, rt.kind))
            if hook:
                hook(obj, src, to_version)
        obj["apiVersion"] = rt.api_version(to_version)
        obj["kind"] = rt.kind
        return obj
