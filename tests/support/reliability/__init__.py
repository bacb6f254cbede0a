"""The reliability suite's replicas, seeded incidents and observers (tests/reliability)."""
