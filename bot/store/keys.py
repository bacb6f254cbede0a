"""The key layout in one place.

Every key of one incident shares the hash tag ``{INC-n}``, and each global family (counters,
the audit chain, the channel index, the levers, the scheduler) its own, so every script's keys
lie in one hash slot (scripts.py checks it on every call) and Redis Cluster can run them.
"""

from __future__ import annotations


class Keys:
    """The key layout in one place."""

    @staticmethod
    def incident(inc: str) -> str:
        return f"fb:inc:{{{inc}}}"

    @staticmethod
    def roles(inc: str) -> str:
        return f"fb:inc:{{{inc}}}:roles"

    @staticmethod
    def tenure(inc: str) -> str:
        return f"fb:inc:{{{inc}}}:tenure"

    @staticmethod
    def handoff(inc: str, hid: str) -> str:
        return f"fb:inc:{{{inc}}}:handoff:{hid}"

    @staticmethod
    def handoff_seq(inc: str) -> str:
        return f"fb:inc:{{{inc}}}:handoff-seq"

    INCIDENT_SEQ = "fb:{seq}:incident"
    REQUEST_SEQ = "fb:{seq}:request"
    INCIDENTS_OPEN = "fb:{idx}:open"

    @staticmethod
    def channel(channel_id: str) -> str:
        return f"fb:{{idx}}:chan:{channel_id}"

    # The chain: seq -> the entry's canonical JSON, a hash so any entry is one O(1) read away
    # (`export --incident`). Schema 1 and before kept it in the list AUDIT_LOG; the migration
    # (bot/audit/migrations.py) moves it here, and AUDIT_LOG_MOVED is the seq up to which the
    # list's entries have moved (an append also moves any an older replica still pushed there).
    AUDIT_ENTRIES = "fb:{audit}:entries"
    AUDIT_LOG = "fb:{audit}:log"
    AUDIT_LOG_MOVED = "fb:{audit}:log-moved"
    AUDIT_HEAD = "fb:{audit}:head"
    # Entries with a seq above this number are in the per-incident index; the ones at or
    # below it predate the index until `firebreak audit reindex` lowers it to 0.
    AUDIT_INDEXED_AFTER = "fb:{audit}:indexed-after"

    # Signed checkpoints of the chain head (bot/audit/sign.py): copies, oldest first, and the
    # claim on a seq that lets one replica sign it.
    AUDIT_CHECKPOINTS = "fb:{audit}:checkpoints"

    @staticmethod
    def audit_checkpoint_claim(seq: int) -> str:
        return f"fb:{{audit}}:checkpoint-claim:{seq}"

    @staticmethod
    def audit_incident(inc: str) -> str:  # the seqs of one incident's audit entries, in order
        return f"fb:{{audit}}:inc:{inc}"

    # Open intents (write intent first, bot/core/dispatch.py): request id -> what it is doing, and
    # "<id>|notes" -> what it made so far. In the {audit} slot: the audit append closes an intent
    # in the same script. The hash is also the index: the repair reads it whole (it stays small).
    AUDIT_INTENTS = "fb:{audit}:intents"

    @staticmethod
    def dedupe(kind: str, key: str) -> str:
        return f"fb:{{dedupe}}:{kind}:{key}"

    @staticmethod
    def inbound(digest: str) -> str:  # a signed Slack request already received (bot/slack/store.py)
        # No hash tag: only ever used alone, so these spread over a cluster's slots.
        return f"fb:inbound:{digest}"

    @staticmethod
    def sched(part: str) -> str:  # the scheduler's keys (bot/scheduler/scripts.py), one slot
        return f"fb:{{sched}}:{part}"

    @staticmethod
    def comms(inc: str, part: str) -> str:  # cadence bookkeeping and reminder dedupe (bot/comms)
        return f"fb:inc:{{{inc}}}:comms:{part}"

    @staticmethod
    def approvals(inc: str, part: str) -> str:  # ballots, votes and grant index (bot/approvals)
        return f"fb:inc:{{{inc}}}:appr:{part}"

    @staticmethod
    def levers(part: str) -> str:  # lever requests (req:REQ-n), per-incident index, budgets, route steps (levers/)
        return f"fb:{{levers}}:{part}"

    GRANT_SEQ = "fb:{seq}:grant"  # break-glass ids BG-<n>
