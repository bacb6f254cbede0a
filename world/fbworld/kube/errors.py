"""Kubernetes `Status` failures, shaped like the real apiserver's."""

from __future__ import annotations

from typing import Any

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    def __init__(self, code: int, message: str, reason: str | None = None, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details

    def status(self) -> dict:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(rt, name: str | None) -> dict:
    d: dict[str, Any] = {"kind": rt.plural}
    if name:
        d["name"] = name
    if rt.group:
        d["group"] = rt.group
    return d


def not_found(rt, name: str) -> ApiError:
    return ApiError(404, f'{rt.group_resource} "{name}" not found', "NotFound", _details(rt, name))


def namespace_not_found(ns: str) -> ApiError:
    return ApiError(404, f'namespaces "{ns}" not found', "NotFound", {"name": ns, "kind": "namespaces"})


def already_exists(rt, name: str) -> ApiError:
    return ApiError(409, f'{rt.group_resource} "{name}" already exists', "AlreadyExists", _details(rt, name))


def conflict(rt, name: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {rt.group_resource} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
        "Conflict",
        _details(rt, name),
    )


def invalid(rt, name: str, causes: list[dict]) -> ApiError:
    """causes: [{"field": "spec.x", "message": "...", "reason": "FieldValueInvalid"}]."""
    kind = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
    summary = ", ".join(f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes)
    if len(causes) > 1:
        summary = f"[{summary}]"
    details = {"name": name, "kind": rt.kind, "causes": causes}
    if rt.group:
        details["group"] = rt.group
    return ApiError(422, f'{kind} "{name}" is invalid: {summary}', "Invalid", details)


def unsupported_patch(accepted: list[str]) -> ApiError:
    return ApiError(
        415,
        "the body of the request was in an unknown format - accepted media types include: " + ", ".join(accepted),
        "UnsupportedMediaType",
    )


def resource_not_found() -> ApiError:
    return ApiError(404, "the server could not find the requested resource", "NotFound", {})


def unauthorized() -> ApiError:
    # responsewriters.UnauthorizedNegotiated: a bare Status, no details.
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(group: str, resource: str, name: str, message: str) -> ApiError:
    """apierrors.NewForbidden(GroupResource{group, resource}, name, err): the qualified resource never
    carries the subresource; the authorizer's message (`err`) names it."""
    qualified = f"{resource}.{group}" if group else resource
    if not resource:
        text = f"forbidden: {message}"
    elif name:
        text = f'{qualified} "{name}" is forbidden: {message}'
    else:
        text = f"{qualified} is forbidden: {message}"
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if resource:
        details["kind"] = resource
    return ApiError(403, text, "Forbidden", details)


def unprocessable(server_message: str) -> ApiError:
    """apierrors.NewGenericServerResponse(422, "", GroupResource{}, "", msg, 0, false), which is how the
    apiserver answers a JSON patch that does not apply (handlers/patch.go applyJSPatch): the generic
    message, the patch library's error as the one cause."""
    return ApiError(
        422,
        "the server rejected our request due to an error in our request",
        "Invalid",
        {"causes": [{"reason": "UnexpectedServerResponse", "message": server_message}]},
    )


def invalid_kind(group: str, kind: str, name: str, causes: list[dict]) -> ApiError:
    """apierrors.NewInvalid for a GroupKind that is not a resource (e.g. PatchOptions.meta.k8s.io, or the
    empty GroupKind the patch handler uses when the patched object cannot be decoded)."""
    qualified = f"{kind}.{group}" if group else kind
    summary = ", ".join(f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes)
    if len(causes) > 1:
        summary = f"[{summary}]"
    details: dict[str, Any] = {"causes": causes}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if kind:
        details["kind"] = kind
    return ApiError(422, f'{qualified} "{name}" is invalid: {summary}', "Invalid", details)
