"""The magic committer: a task's files stream into pending multipart uploads.

S3's binding (:mod:`.committer`) of core's magic committer
(:mod:`outcommit.committers.delayed.magic`, its filesystem and upload tracker); job
commit is :class:`outcommit.committers.delayed.committer.DelayedCompletionCommitter`'s.
"""
