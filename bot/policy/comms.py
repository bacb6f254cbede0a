"""The comms policy section (policies/comms.yaml): public granularity and secret patterns."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from bot.policy.models import Strict
from bot.redact import compile_pattern


def _compiles(patterns: list[str]) -> list[str]:
    for p in patterns:
        try:
            re.compile(p)
        except re.error as exc:
            raise ValueError(f"pattern {p!r} is not a valid regular expression ({exc})") from None
    return patterns


def _links(links: list[str]) -> list[str]:
    for link in links:
        u = urlsplit(link)
        if u.scheme not in ("https", "http") or not u.hostname or u.username or u.password or u.query or u.fragment:
            raise ValueError(
                f"link {link!r} is not a site prefix: write the scheme, the host and, if any, the path, "
                "e.g. 'https://status.example.com/'"
            )
    return links


class PublicPolicy(Strict):
    """What may not appear in a public (stakeholder) update: status pages are product × region."""

    cell_patterns: list[str] = Field(default_factory=list)
    node_patterns: list[str] = Field(default_factory=list)
    # The only sites a public update may link to (scheme, host and path prefix), besides the
    # incident's own channel: a bare link elsewhere is refused (bot/comms/public.py).
    links: list[str] = Field(default_factory=list)

    _ok = field_validator("cell_patterns", "node_patterns")(lambda cls, v: _compiles(v))
    _links_ok = field_validator("links")(lambda cls, v: _links(v))


class SecretPattern(Strict):
    kind: str = Field(min_length=1, max_length=60)  # what the warning names
    pattern: str

    @model_validator(mode="after")
    def _runs_on_re2(self) -> SecretPattern:
        # Every secret scan runs on RE2 (linear time, bot/redact.py): refused here, at start, with
        # the kind (the loader adds the file and line), rather than failing on the first message.
        try:
            compile_pattern(self.pattern)
        except ValueError as exc:
            raise ValueError(f"the {self.kind!r} {exc}") from None
        return self


class CommsPolicy(Strict):
    public: PublicPolicy = Field(default_factory=PublicPolicy)
    # Added to the built-in patterns in bot/redact.py.
    secret_patterns: list[SecretPattern] = Field(default_factory=list)
