"""/metrics as the app serves it, read back as numbers."""

from __future__ import annotations

import math

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from tests.support.harness import RunningApp


class Scrape:
    """One /metrics page: sample values by name and labels (absent: 0)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                self.samples[(s.name, frozenset(s.labels.items()))] = s.value

    def value(self, name: str, **labels: str) -> float:
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def labelsets(self, name: str) -> list[dict[str, str]]:
        return [dict(labels) for (n, labels) in self.samples if n == name]


async def scrape(app: RunningApp) -> Scrape:
    async with aiohttp.ClientSession() as s, s.get(app.url + "/metrics") as r:
        assert r.status == 200, r.status
        assert r.headers["Content-Type"].startswith("text/plain; version=")  # Prometheus text format
        return Scrape(await r.text())


class Delta:
    """What changed between two scrapes (counters and histograms only go up)."""

    def __init__(self, before: Scrape, after: Scrape) -> None:
        self.before, self.after = before, after

    def __call__(self, name: str, **labels: str) -> float:
        return self.after.value(name, **labels) - self.before.value(name, **labels)

    def moved(self, name: str) -> list[dict[str, str]]:
        """The label sets of ``name`` that changed: the registry is the process's, so label sets
        earlier tests counted are on every page and say nothing about this one."""
        return [ls for ls in self.after.labelsets(name) if self(name, **ls) != 0]


def is_nan(x: float) -> bool:
    return math.isnan(x)
