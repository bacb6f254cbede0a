"""Durable timed jobs in Redis: delivered once across replicas, surviving restarts.

Use ``svc.scheduler.schedule(kind, key, due, payload)`` to (re)schedule,
``cancel(kind, key)`` to drop, and ``@job_handler(kind)`` to handle.
"""
from bot.scheduler.jobs import HANDLERS, STARTUP, Job, job_handler, on_start
from bot.scheduler.scheduler import Scheduler

__all__ = ["HANDLERS", "STARTUP", "Job", "Scheduler", "job_handler", "on_start"]
