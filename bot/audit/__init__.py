from bot.audit.chain import AuditLog, AuditEntry, GENESIS_HASH, entry_hash, verify_entries

__all__ = ["AuditLog", "AuditEntry", "GENESIS_HASH", "entry_hash", "verify_entries"]
