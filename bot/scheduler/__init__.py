"""Durable timed jobs in Redis: delivered once across replicas, surviving restarts.

``svc.scheduler.schedule(kind, key, due, payload)`` (re)schedules, ``cancel(kind,
key)`` drops; a capability handles a kind with ``reg.job(kind, handler)`` in its
``register``, and bot/runtime.py binds the handlers to the scheduler.
"""

from bot.scheduler.jobs import Job
from bot.scheduler.scheduler import Scheduler

__all__ = ["Job", "Scheduler"]
