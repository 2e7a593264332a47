"""Hadoop's S3A keys that outcommit does not read: the families the plugin declares.

A Spark session's Hadoop configuration is shared by Hadoop's own S3A connector and
committers: it carries keys of theirs that outcommit has no use for, and they must pass.
Any other key of ``fs.s3a.committer.*`` (Hadoop's ``CommitConstants``: every key of the
family is listed) is a typo, and so is a near miss of a listed ``fs.s3a.*`` key: Hadoop
would ignore both as silently (``outcommit.keys.check`` reports them, naming the key meant).
The connector reads more ``fs.s3a.*`` keys than any list here holds (and per-bucket
``fs.s3a.bucket.<name>.*`` forms), so that family is open: a key that is no near miss passes.
"""

from __future__ import annotations

from outcommit import KeyFamily

#: Hadoop's S3A committer keys outcommit does not read (CommitConstants, Hadoop 3.5).
HADOOP_COMMITTER_KEYS = frozenset({
    "fs.s3a.committer.magic.enabled",
    "fs.s3a.committer.staging.tmp.path",
    "fs.s3a.committer.staging.abort.pending.uploads",
    "fs.s3a.committer.overwrite.and.commit",
    "fs.s3a.committer.delete.directory.threads",
    "fs.s3a.committer.require.uuid",
    "fs.s3a.committer.generate.uuid",
    "fs.s3a.committer.experimental.collect.iostatistics",
})

#: Hadoop's S3A connector keys outcommit does not read (core-default.xml of Hadoop 3.5 and
#: the connector's Constants): the near misses of these are Hadoop's, not typos.
HADOOP_S3A_KEYS = frozenset({
    "fs.s3a.accesspoint.required", "fs.s3a.assumed.role.credentials.provider",
    "fs.s3a.assumed.role.policy", "fs.s3a.assumed.role.session.duration",
    "fs.s3a.assumed.role.sts.endpoint.region", "fs.s3a.aws.credentials.provider",
    "fs.s3a.aws.credentials.provider.mapping", "fs.s3a.block.size", "fs.s3a.bucket.probe",
    "fs.s3a.bulk.delete.page.size", "fs.s3a.checksum.validation",
    "fs.s3a.classloader.isolation", "fs.s3a.connection.acquisition.timeout",
    "fs.s3a.connection.expect.continue", "fs.s3a.connection.idle.time",
    "fs.s3a.connection.keepalive", "fs.s3a.connection.part.upload.timeout",
    "fs.s3a.connection.request.timeout", "fs.s3a.connection.ttl",
    "fs.s3a.create.checksum.algorithm", "fs.s3a.create.conditional.enabled",
    "fs.s3a.create.performance", "fs.s3a.cross.region.access.enabled", "fs.s3a.custom.signers",
    "fs.s3a.directory.marker.audit", "fs.s3a.directory.marker.retention",
    "fs.s3a.downgrade.syncable.exceptions", "fs.s3a.encryption.context",
    "fs.s3a.endpoint.fips", "fs.s3a.etag.checksum.enabled", "fs.s3a.executor.capacity",
    "fs.s3a.experimental.input.fadvise", "fs.s3a.fast.buffer.size", "fs.s3a.fast.upload",
    "fs.s3a.fast.upload.active.blocks", "fs.s3a.fast.upload.buffer", "fs.s3a.impl",
    "fs.s3a.input.fadvise", "fs.s3a.input.stream.type", "fs.s3a.list.version",
    "fs.s3a.max.total.tasks", "fs.s3a.metadatastore.authoritative", "fs.s3a.metadatastore.impl",
    "fs.s3a.multiobjectdelete.enable", "fs.s3a.multipart.purge", "fs.s3a.multipart.purge.age",
    "fs.s3a.multipart.threshold", "fs.s3a.multipart.uploads.enabled",
    "fs.s3a.object.content.encoding", "fs.s3a.optimized.copy.from.local.enabled",
    "fs.s3a.paging.maximum", "fs.s3a.performance.flags", "fs.s3a.proxy.domain",
    "fs.s3a.proxy.host", "fs.s3a.proxy.password", "fs.s3a.proxy.port", "fs.s3a.proxy.username",
    "fs.s3a.proxy.workstation", "fs.s3a.readahead.range", "fs.s3a.retry.http.5xx.errors",
    "fs.s3a.retry.interval", "fs.s3a.retry.limit", "fs.s3a.retry.throttle.interval",
    "fs.s3a.retry.throttle.limit", "fs.s3a.s3.client.factory.impl", "fs.s3a.s3.signing-algorithm",
    "fs.s3a.s3express.create.session", "fs.s3a.security.credential.provider.path",
    "fs.s3a.server-side-encryption-algorithm", "fs.s3a.server-side-encryption.key",
    "fs.s3a.signing-algorithm", "fs.s3a.socket.recv.buffer", "fs.s3a.socket.send.buffer",
    "fs.s3a.ssl.channel.mode", "fs.s3a.sts.signing-algorithm", "fs.s3a.threads.keepalivetime",
    "fs.s3a.threads.max", "fs.s3a.user.agent.prefix",
})

#: Subtrees of Hadoop's S3A keys that pass whole: per-bucket settings, auditing, S3 Select,
#: prefetching, vectored reads, delegation tokens, change detection, headers, S3Guard.
HADOOP_S3A_PREFIXES = ("fs.s3a.bucket.", "fs.s3a.audit.", "fs.s3a.select.", "fs.s3a.prefetch.",
                       "fs.s3a.vectored.", "fs.s3a.delegation.", "fs.s3a.change.detection.",
                       "fs.s3a.create.header.", "fs.s3a.s3guard.", "fs.s3a.access.grants.",
                       "fs.s3a.analytics.accelerator.", "fs.s3a.encryption.cse.")

FAMILIES = (
    KeyFamily("fs.s3a.committer.", HADOOP_COMMITTER_KEYS, label="Hadoop's S3A committers"),
    KeyFamily("fs.s3a.", HADOOP_S3A_KEYS, closed=False, label="Hadoop's S3A connector",
              hadoop_prefixes=HADOOP_S3A_PREFIXES),
)
