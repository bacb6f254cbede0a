"""Typed postmortem commands: `postmortem`, `cause`, `action`, and the reminder timer.

Each typed command's text arrives whole (the grammar's ``rest_raw``) and is shaped here, so
evidence and causes are kept as typed. A command rebuilt from its audited arguments (the dict
already has its fields) passes through unchanged.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from bot.chat import person_of, quote, visible
from bot.core.grammar import tokens
from bot.core.request import Command
from bot.postmortem import rules
from bot.postmortem.store import Kind

_SEV = re.compile(r"^(?:sev)?([1-4])$", re.IGNORECASE)
_ACTION_ID = r"^AI-[1-9][0-9]*$"

PM_USAGE = (
    "/incident postmortem  ·  postmortem impact <ISO-8601 UTC> <evidence>  ·  postmortem rework <hours>  ·  "
    "postmortem impact-figures requests=N tokens=N  ·  postmortem sev <N> <reason>"
)
CAUSE_USAGE = "/incident cause detection|trigger|root <text>  ·  /incident cause root class: <name> <text>"
ACTION_USAGE = (
    '/incident action <text> --owner <@user> --due YYYY-MM-DD --verify "<check>" '
    "[--kind alert|runbook|guardrail|gameday|other]  ·  /incident action done <AI-n> <evidence>"
)


def _clean(text: str) -> str:
    # Stored without bidi controls or zero-width characters (they reorder or hide what is shown).
    return visible(text).strip()


def _split(text: str) -> tuple[str, str]:
    """The first word (lowercased) and the rest, as typed."""
    head, _, rest = _clean(text).partition(" ")
    return head.lower(), rest.strip()


def _sev(word: str) -> int:
    m = _SEV.fullmatch(word.strip())
    if not m:
        raise ValueError(f"`{quote(word[:20])}` is not a SEV: use 1 (worst) to 4, like `postmortem sev 3 <reason>`")
    return int(m.group(1))


# postmortem -----------------------------------------------------------------------------------

PmSub = Literal["post", "impact", "rework", "impact_figures", "sev"]


class Postmortem(Command):
    """`postmortem` (post the document) or one of its facts: `impact`, `rework`,
    `impact-figures`, `sev`."""

    name: ClassVar[str] = "postmortem"
    prose: ClassVar[frozenset[str]] = frozenset({"text", "evidence", "reason"})  # text: before it is shaped
    sub: PmSub = "post"
    at: float | None = None  # impact: the start, epoch seconds
    evidence: str | None = Field(default=None, max_length=2000)
    hours: float | None = None  # rework
    requests: int | None = None  # impact-figures
    tokens: int | None = None
    sev: int | None = Field(default=None, ge=1, le=4)
    reason: str | None = Field(default=None, max_length=500)

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "sub" in data or set(data) - {"text"}:
            return data
        head, rest = _split(str(data.get("text") or ""))
        if not head:
            return {"sub": "post"}
        if head == "impact":
            when, _, evidence = rest.partition(" ")
            if not when:
                raise ValueError(
                    f"give the impact start and your evidence: `postmortem impact {rules.IMPACT_EXAMPLE} "
                    "<how you know: a dashboard, a log line>`"
                )
            at = rules.parse_utc(when)
            if not evidence.strip():
                raise ValueError(
                    f"say how you know it started then, after the time: `postmortem impact {when[:30]} "
                    "<evidence: a dashboard, a log line, a ticket>`"
                )
            return {"sub": "impact", "at": at, "evidence": evidence.strip()}
        if head == "rework":
            words = rest.split()
            if len(words) != 1:
                raise ValueError("give the hours of progress thrown away, one number: `postmortem rework 6.5`")
            return {"sub": "rework", "hours": rules.parse_hours(words[0])}
        if head in ("impact-figures", "impact_figures", "figures"):
            return {"sub": "impact_figures", **_figures(rest)}
        if head == "sev":
            words = rest.split(None, 1)
            if not words:
                raise ValueError("give the SEV and why: `postmortem sev 3 <reason>`")
            sev = _sev(words[0])
            if len(words) < 2 or not words[1].strip():
                raise ValueError(f"say why the SEV goes down: `postmortem sev {sev} <reason>`")
            return {"sub": "sev", "sev": sev, "reason": words[1].strip()}
        raise ValueError(
            f"`{quote(head[:30])}` is not a postmortem command: `/incident postmortem` posts the document; "
            "`postmortem impact|rework|impact-figures|sev …` record its facts"
        )


def _figures(rest: str) -> dict[str, int]:
    example = "`postmortem impact-figures requests=120000 tokens=3500000` (either or both)"
    out: dict[str, int] = {}
    for word in tokens(rest):
        key, eq, value = word.partition("=")
        key = key.lower()
        if not eq or key not in ("requests", "tokens"):
            raise ValueError(f"`{quote(word[:30])}` is not a figure: use {example}")
        if key in out:
            raise ValueError(f"`{key}=` given twice: use {example}")
        out[key] = rules.parse_count(key, value)
    if not out:
        raise ValueError(f"give requests failed, tokens refunded or both: {example}")
    return out


# cause ----------------------------------------------------------------------------------------


class Cause(Command):
    """`cause detection|trigger|root <text>`; a root may name its class (`class: driver …`)."""

    name: ClassVar[str] = "cause"
    prose: ClassVar[frozenset[str]] = frozenset({"text"})
    which: Literal["detection", "trigger", "root"]
    text: str = Field(min_length=1, max_length=2000)
    root_class: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "which" in data or set(data) - {"text"}:
            return data
        head, rest = _split(str(data.get("text") or ""))
        if head not in ("detection", "trigger", "root"):
            what = f"`{quote(head[:20])}` is not one of them" if head else "say which cause"
            raise ValueError(
                f"{what}: `cause detection <why it was not seen sooner>`, `cause trigger <what set it off>` "
                "or `cause root <why it could happen>`"
            )
        if not rest:
            raise ValueError(f"say what it was: `cause {head} <text>`")
        if head != "root":
            if rules.split_root(rest)[0] is not None:
                raise ValueError(f"only `cause root` takes a `class:`; give the {head} as plain text")
            return {"which": head, "text": rest}
        root_class, text = rules.root_text(rest)
        return {"which": head, "text": text, "root_class": root_class}


# action ---------------------------------------------------------------------------------------


class Action(Command):
    """`action <text> --owner --due --verify [--kind]` adds an item; `action done AI-n <evidence>`
    closes one."""

    name: ClassVar[str] = "action"
    prose: ClassVar[frozenset[str]] = frozenset({"text", "verify", "evidence"})
    text: str | None = Field(default=None, max_length=1000)
    owner: str | None = None
    due: str | None = None
    verify: str | None = Field(default=None, max_length=500)
    kind: Kind = "other"
    done: str | None = Field(default=None, pattern=_ACTION_ID)
    evidence: str | None = Field(default=None, max_length=2000)

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "done" in data:
            return data
        text = _clean(str(data.get("text") or ""))
        head, _, rest = text.partition(" ")
        if head.lower() != "done":
            return {**data, "text": text or None}
        flags = [f"--{k}" for k in ("owner", "due", "verify", "kind") if k in data]
        if flags:
            raise ValueError(f"`action done` takes no {', '.join(flags)}: `action done AI-3 <evidence>`")
        item, _, evidence = rest.strip().partition(" ")
        if not item:
            raise ValueError("name the item and how you know it shipped: `action done AI-3 <evidence>`")
        item = rules.parse_action_id(item)
        if not evidence.strip():
            raise ValueError(
                f"evidence is required to close {item}: `action done {item} <a link, the alert firing in a test, "
                "the runbook page>`"
            )
        return {"done": item, "evidence": evidence.strip()}

    @field_validator("owner", mode="before")
    @classmethod
    def _owner(cls, v: object) -> object:
        if v is None:
            return v
        uid = person_of(str(v))
        if uid is None:
            raise ValueError(
                f"`--owner {quote(str(v)[:30])}` is not a person: mention them, like `--owner @alex` "
                "(one person owns an item)"
            )
        return uid

    @field_validator("due", mode="before")
    @classmethod
    def _due(cls, v: object) -> object:
        return None if v is None else rules.parse_due(str(v)).isoformat()

    @field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, v: object) -> object:
        k = str(v).strip().lower().replace("-", "").replace("_", "")
        if k not in ("alert", "runbook", "guardrail", "gameday", "other"):
            raise ValueError(
                f"`--kind {quote(str(v)[:20])}` is not a kind: use alert, runbook, guardrail, gameday or other"
            )
        return k

    @field_validator("verify", mode="before")
    @classmethod
    def _verify(cls, v: object) -> object:
        return _clean(str(v)) or None if v is not None else None

    @model_validator(mode="after")
    def _ships(self) -> Action:
        if self.done is not None:
            return self
        missing = [
            label
            for label, value in (
                ("--owner <@user>", self.owner),
                ("--due YYYY-MM-DD", self.due),
                ('--verify "<how we will know it works>"', self.verify),
            )
            if not value
        ]
        if not self.text:
            raise ValueError('say what the item is: `action <text> --owner @alex --due 2026-12-15 --verify "<check>"`')
        if missing:
            raise ValueError(
                "An action item needs an owner, a due date and a verification, or it won't ship; "
                f"add {', '.join(missing)}"
            )
        return self


class ActionRemind(Command):
    """The reminder of one round for an open item (scheduler, actor system)."""

    name: ClassVar[str] = "action_remind"
    item: str = Field(pattern=_ACTION_ID)
    round: int = Field(ge=1, le=100_000)
    late: bool = False
