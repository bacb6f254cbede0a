from bot.audit.chain import GENESIS_HASH, AuditEntry, AuditLog, entry_hash, verify_entries

__all__ = ["GENESIS_HASH", "AuditEntry", "AuditLog", "entry_hash", "verify_entries"]
