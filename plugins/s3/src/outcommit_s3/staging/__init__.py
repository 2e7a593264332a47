"""The staging committers (``directory``, ``partitioned``): write locally, upload at task commit.

Job commit: :mod:`outcommit.committers.delayed.committer`.
"""
