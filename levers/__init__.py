"""Levers: scoped, reversible actions on one cell's Kubernetes API (DESIGN.md section 4).

Import the pieces you need (levers.base, levers.executor, levers.hooks, ...);
this package file stays import-free so the policy loader can read
levers.policy without pulling in the Kubernetes client.
"""
