"""Levers: scoped, reversible actions on one cell's Kubernetes API (docs/levers.md).

levers.capability.register declares the commands, timer, start-up sweep and
status line; import the other pieces you need (levers.executor, levers.hooks,
levers.store, ...). This package file imports nothing, so importing one piece
does not pull in the Kubernetes client.
"""
