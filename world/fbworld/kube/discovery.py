"""Legacy (non-aggregated) discovery documents.

kubectl asks for aggregated discovery first (Accept: ...;as=APIGroupDiscoveryList)
but falls back to these when the server answers with plain application/json.
"""

from __future__ import annotations

from .resources import Registry, ResourceType

VERBS = ["create", "delete", "get", "list", "patch", "update"]
SUB_VERBS = ["get", "patch", "update"]


def version_info() -> dict:
    return {
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.4-fake",
        "gitCommit": "0" * 40,
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.23.6",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(host: str) -> dict:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
    }


def _group(name: str, versions: list[str]) -> dict:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list(reg: Registry) -> dict:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(g, vs) for g, vs in sorted(reg.groups().items()) if g],
    }


def api_group(reg: Registry, group: str) -> dict | None:
    versions = reg.groups().get(group)
    if not group or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


def _resources(rt: ResourceType) -> list[dict]:
    main = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": VERBS,
    }
    if rt.short_names:
        main["shortNames"] = rt.short_names
    if rt.categories:
        main["categories"] = rt.categories
    out = [main]
    if rt.has_status:
        out.append(
            {
                "name": f"{rt.plural}/status",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": SUB_VERBS,
            }
        )
    if rt.scale:
        out.append(
            {
                "name": f"{rt.plural}/scale",
                "singularName": "",
                "namespaced": rt.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": SUB_VERBS,
            }
        )
    return out


def api_resource_list(reg: Registry, group: str, version: str) -> dict | None:
    types = [rt for rt in reg.types if rt.group == group and version in rt.versions]
    if not types:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": [r for rt in types for r in _resources(rt)],
    }
