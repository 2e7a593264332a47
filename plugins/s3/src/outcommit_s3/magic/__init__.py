"""The magic committer: a task's files stream into pending multipart uploads.

``filesystem``: the task's view of S3 (magic paths, upload streams); ``committer``:
task commit of the attempt's uploads. Job commit: :mod:`outcommit_s3.commit.committer`.
"""
