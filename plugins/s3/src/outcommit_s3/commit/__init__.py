"""S3's binding of the delayed-completion committers (:mod:`outcommit.committers.delayed`).

Everything the multipart committers share — pending files, job layout, claims, job
commit, conflicts, the pending-upload sweep, cleanup — lives in core, shared with
Azure's ``blocklist``. What is S3's: the uploads are S3 multipart uploads
(``S3Store.multipart()``), and the settings have ``outcommit.s3.`` names
(:mod:`.committer`). The committers themselves: :mod:`outcommit_s3.magic` and
:mod:`outcommit_s3.staging`.
"""
