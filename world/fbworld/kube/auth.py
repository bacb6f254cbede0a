"""Authentication (bearer tokens) and RBAC-style authorization for the fake API server.

Request attributes are derived the way the apiserver's RequestInfoFactory does it, and a rule
matches the way RBAC's PolicyRule matching does (k8s.io/component-helpers/auth/rbac/validation:
VerbMatches, APIGroupMatches, ResourceMatches, ResourceNameMatches), so a test's rule set denies
exactly what the same Role would deny on a real cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from . import errors

# Subresources of a namespace itself: /api/v1/namespaces/<ns>/status is the namespace's status.
_NAMESPACE_SUBRESOURCES = {"status", "finalize"}


@dataclass(frozen=True)
class Rule:
    """One RBAC PolicyRule: verbs, apiGroups ("" is core), resources ("nodes", "rollouts/status",
    "*", "*/scale") and optional resourceNames. With `namespace`, a Role's rule: it allows only requests
    in that namespace (never a cluster-scoped or all-namespaces one), as a RoleBinding grants it."""

    verbs: Sequence[str]
    groups: Sequence[str]
    resources: Sequence[str]
    names: Sequence[str] = ()
    namespace: str | None = None

    def __post_init__(self) -> None:
        # A bare string would match per character; RBAC rules are lists.
        for attr in ("verbs", "groups", "resources", "names"):
            if isinstance(getattr(self, attr), str):
                raise TypeError(f"Rule.{attr} must be a sequence of strings, not a string")

    def matches(self, req: RequestInfo) -> bool:
        combined = f"{req.resource}/{req.subresource}" if req.subresource else req.resource
        return (
            ("*" in self.verbs or req.verb in self.verbs)
            and ("*" in self.groups or req.group in self.groups)
            and _resource_matches(self.resources, combined, req.subresource)
            and (not self.names or req.name in self.names)
            and (self.namespace is None or req.namespace == self.namespace)
        )


def _resource_matches(resources: Sequence[str], combined: str, subresource: str) -> bool:
    for r in resources:
        if r in ("*", combined):
            return True
        if subresource and r == f"*/{subresource}":
            return True
    return False


@dataclass(frozen=True)
class RequestInfo:
    is_resource: bool
    verb: str
    path: str
    group: str = ""
    version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "GET": "get", "HEAD": "get", "DELETE": "delete"}


def request_info(method: str, path: str, query: dict[str, str]) -> RequestInfo:
    """RequestInfoFactory.NewRequestInfo, for /api and /apis paths; everything else is a
    non-resource request."""
    parts = [p for p in path.split("/") if p]
    verb = method.lower()
    if not parts or parts[0] not in ("api", "apis"):
        return RequestInfo(False, verb, path)
    if parts[0] == "api":
        if len(parts) < 2:
            return RequestInfo(False, verb, path)
        group, version, rest = "", parts[1], parts[2:]
    else:
        if len(parts) < 3:
            return RequestInfo(False, verb, path)
        group, version, rest = parts[1], parts[2], parts[3:]
    if not rest:
        return RequestInfo(False, verb, path)  # discovery of a group version
    verb = _VERBS.get(method.upper(), verb)
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if not name:
        if verb == "get":
            verb = "watch" if query.get("watch") in ("1", "true") else "list"
        elif verb == "delete":
            verb = "deletecollection"
    return RequestInfo(True, verb, path, group, version, namespace, resource, subresource, name)


def forbidden_message(user: str, req: RequestInfo) -> str:
    """responsewriters.forbiddenMessage."""
    if not req.is_resource:
        return f'User "{user}" cannot {req.verb} path "{req.path}"'
    resource = f"{req.resource}/{req.subresource}" if req.subresource else req.resource
    if req.namespace:
        return (
            f'User "{user}" cannot {req.verb} resource "{resource}" in API group "{req.group}" '
            f'in the namespace "{req.namespace}"'
        )
    return f'User "{user}" cannot {req.verb} resource "{resource}" in API group "{req.group}" at the cluster scope'


def authorize(rules: Sequence[Rule] | None, user: str, req: RequestInfo) -> None:
    """Raise the real 403 unless a rule allows the request. Non-resource requests (discovery, /version,
    /openapi) stay allowed: every real cluster binds system:discovery and system:public-info-viewer
    to authenticated users."""
    if rules is None or not req.is_resource:
        return
    if any(rule.matches(req) for rule in rules):
        return
    raise errors.forbidden(req.group, req.resource, req.name, forbidden_message(user, req))


def authenticate(header: str | None, tokens: set[str]) -> None:
    """Bearer-token authentication; anything else is the real 401."""
    scheme, _, token = (header or "").partition(" ")
    if scheme.lower() != "bearer" or token.strip() not in tokens:
        raise errors.unauthorized()


__all__ = ["RequestInfo", "Rule", "authenticate", "authorize", "forbidden_message", "request_info"]
