"""Committers that complete delayed uploads at job commit, and what they share, by concern.

S3's ``magic``, ``directory`` and ``partitioned`` (multipart uploads) and Azure's
``blocklist`` (blocks staged under the final names) are bindings of these modules: they
differ only in the store interface that carries the uploads and in their settings.

=================  ============================================================
``files``          ``.pending``/``.pendingset`` formats, validated on load
``layout``         where a job's state lives (job, attempt, task directories)
``claims``         which attempt of a task is committed without task messages
``pendingsets``    what a job commit completes: from messages, or discovered
``operations``     completing and aborting uploads, contained
``conflicts``      conflict modes fail / append / replace, destination or partitions
``sweep``          aborting the pending uploads under a destination nobody owns
``cleanup``        ending a job; abort, cleanup, and the teardown after commit
``committer``      ``DelayedCompletionCommitter``: task commit, **job commit**, abort
``filesystem``     the magic paths' filesystem: writes stream into pending uploads
``tracker``        an attempt's uploads, in the memory of the process that writes them
``magic``          ``MagicCommitterBase``: task commit of streamed uploads
=================  ============================================================
"""
