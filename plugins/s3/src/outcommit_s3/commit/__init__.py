"""What every multipart committer (magic, directory, partitioned) shares, by concern.

=================  ============================================================
``files``          ``.pending``/``.pendingset`` formats, validated on load
``layout``         where a job's state lives (job, attempt, task directories)
``claims``         which attempt of a task is committed without task messages
``pendingsets``    what a job commit completes: from messages, or discovered
``operations``     completing and aborting uploads, contained
``conflicts``      conflict modes fail / append / replace, destination or partitions
``sweep``          aborting the pending uploads under a destination nobody owns
``cleanup``        ending a job; abort, cleanup, and the teardown after commit
``committer``      ``MultipartCommitter``: task commit, **job commit**, abort
=================  ============================================================

The committers themselves: :mod:`outcommit_s3.magic` and :mod:`outcommit_s3.staging`.
"""
