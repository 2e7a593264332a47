"""``memmp-magic``: the magic committer bound to the ``memmp://`` store (core's own binding).

The delayed-completion family run without a server: tests of the family in core, and
pipelines that want S3's commit protocol in one process. The binding supplies what a store
plugin's would: the pending files' URI scheme and the uploads' interface (S3 multipart).
"""

from __future__ import annotations

from typing import ClassVar

from .magic import MagicCommitterBase

ABORT_PENDING_KEY = "outcommit.memmp.abort-pending-uploads"
CONFIG_KEYS = {
    ABORT_PENDING_KEY: "memmp-magic: abort every pending upload under the destination at job "
                       "commit and abort (default true, as S3's outcommit.s3.abort-pending-uploads)",
}


class MemoryMagicCommitter(MagicCommitterBase):
    """Stream to pending ``memmp://`` uploads, complete them at job commit."""

    name = "memmp-magic"
    exclusive_completion = True
    uri_schemes: ClassVar[tuple[str, ...]] = ("memmp",)
    made_for: ClassVar[tuple[str, ...]] = ("memmp",)  # its uploads live in this process
    abort_pending_key = ABORT_PENDING_KEY
