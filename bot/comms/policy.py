"""The comms policy section (policies/comms.yaml): public granularity and secret patterns."""
from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _compiles(patterns: list[str]) -> list[str]:
    for p in patterns:
        try:
            re.compile(p)
        except re.error as exc:
            raise ValueError(f"pattern {p!r} is not a valid regular expression ({exc})") from None
    return patterns


class PublicPolicy(_Strict):
    """What may not appear in a public (stakeholder) update: status pages are product × region."""

    cell_patterns: list[str] = Field(default_factory=list)
    node_patterns: list[str] = Field(default_factory=list)

    _ok = field_validator("cell_patterns", "node_patterns")(lambda cls, v: _compiles(v))


class SecretPattern(_Strict):
    kind: str = Field(min_length=1, max_length=60)  # what the warning names
    pattern: str

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        return _compiles([v])[0]


class CommsPolicy(_Strict):
    public: PublicPolicy = Field(default_factory=PublicPolicy)
    # Added to the built-in patterns in bot/redact.py.
    secret_patterns: list[SecretPattern] = Field(default_factory=list)
