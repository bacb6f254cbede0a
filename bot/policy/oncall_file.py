"""policies/oncall.yaml as it is now: read again whenever the file changes
(docs/security-model.md, "Eligibility").

Whoever rewrites the file (a job following the pager, a ConfigMap update swapping its symlink)
changes who is on call without a restart: every read stats the file and parses it again when its
inode, size or modification time moved. A file that no longer parses, or is gone, names nobody
(``oncall`` eligibility fails closed) and says why in ``error`` until it is fixed; it does not keep
the last good answer, which could keep someone rotated off call eligible. The packaged default
(no policy directory) never changes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from bot import logs
from bot.policy.loader import PolicyError, _parse
from bot.policy.oncall import OncallPolicy

log = logs.get(__name__)

_Stamp = tuple[int, int, int, int]  # device, inode, size, mtime (ns)


@dataclass
class OncallFile:
    path: Path | None  # None: the packaged default, read once
    policy: OncallPolicy
    error: str | None = None  # why nobody is on call now (the file can't be read), for refusals
    _stamp: _Stamp | None = field(default=None, repr=False)

    @classmethod
    def at(cls, where: str, first: OncallPolicy) -> OncallFile:
        """``where``: the section's source (Policy.sources["oncall"].where); ``first``: what the start read."""
        if where.startswith("<"):
            return cls(None, first)
        got = cls(Path(where), first)
        got._stamp = got._stat()
        return got

    def _stat(self) -> _Stamp | None:
        assert self.path is not None
        try:
            st = os.stat(self.path)  # follows a ConfigMap's ..data symlink: a swap is a new inode
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def current(self) -> OncallPolicy:
        if self.path is None:
            return self.policy
        stamp = self._stat()
        if stamp is not None and stamp == self._stamp:
            return self.policy
        self._stamp = stamp
        try:
            text = self.path.read_text(encoding="utf-8")
            parsed, _ = _parse(OncallPolicy, text, str(self.path), {})
        except (OSError, PolicyError) as exc:
            self.policy, self.error = OncallPolicy(), f"{self.path} can't be read ({exc})"
            log.error("oncall_file_unreadable", path=str(self.path), error=str(exc))
            return self.policy
        assert isinstance(parsed, OncallPolicy)
        if parsed != self.policy or self.error:
            log.info("oncall_file_reread", path=str(self.path))
        self.policy, self.error = parsed, None
        return self.policy
