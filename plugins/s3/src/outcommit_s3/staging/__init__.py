"""The staging committers (``directory``, ``partitioned``): write locally, upload at task commit.

Job commit: :mod:`outcommit_s3.commit.committer`.
"""
