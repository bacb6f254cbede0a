"""The incident domain: models, rules (pure functions) and Redis persistence."""
