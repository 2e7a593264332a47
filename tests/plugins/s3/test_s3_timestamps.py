"""The store's client parses S3's timestamps without dateutil, to the same datetimes (issue 30 #3).

botocore hands every timestamp to ``dateutil.parser.parse``: 53% of a 1,000-key listing
page's client CPU. The store's sessions parse S3's two forms with the standard library
(``outcommit_s3.client.parse_timestamp``) and fall back to botocore's parser otherwise.
"""

from __future__ import annotations

import traceback
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from typing import Any

import dateutil.parser
import pytest
from botocore.utils import parse_timestamp as botocore_parse
from hypothesis import given
from hypothesis import strategies as st

import outcommit
from generative import budget
from outcommit_s3.client import parse_timestamp

pytestmark = pytest.mark.s3


def test_listings_and_heads_parse_their_times_without_dateutil(s3_config: dict[str, Any], s3_root: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A listing, a HEAD and the pending uploads' listing: their times are aware datetimes
    (HEAD's and the listing's of the server's clock; moto dates every upload 2010-11-10),
    and dateutil (a pass-through spy counts its calls from botocore's parsers) parsed none."""
    store = outcommit.open_store(s3_root, s3_config)
    dest = store.strip(s3_root)
    store.write_bytes(f"{dest}/a.bin", b"x")
    upload = store.multipart().initiate(f"{dest}/b.bin")
    calls: list[str] = []
    real = dateutil.parser.parse

    def counted(value: str, *args: Any, **kwargs: Any) -> Any:
        # The moto server runs in this process, and its serializer uses dateutil too:
        # only the client's response parser counts.
        if any(frame.filename.endswith(("botocore/parsers.py", "aiobotocore/parsers.py"))
               for frame in traceback.extract_stack()):
            calls.append(value)
        return real(value, *args, **kwargs)

    monkeypatch.setattr(dateutil.parser, "parse", counted)
    now = datetime.now(timezone.utc)
    try:
        modified = store.modified(f"{dest}/a.bin")
        pending = store.multipart().list_pending(dest + "/")
        listed = store.client.list_objects_v2(Bucket=dest.split("/")[0], Prefix=dest.partition("/")[2] + "/")
    finally:
        store.multipart().abort(f"{dest}/b.bin", upload)
    stamped = [modified, *(o["LastModified"] for o in listed["Contents"])]
    initiated = [p.initiated for p in pending]
    assert len(stamped) == 2 and len(initiated) == 1 and calls == []
    for when in stamped + initiated:
        assert isinstance(when, datetime) and when.utcoffset() == timedelta(0), when
    for when in stamped:  # S3's clock is this machine's here (moto); HEAD has whole seconds
        assert abs(when - now) < timedelta(minutes=5), (when, now)


@pytest.mark.generative
@budget(200)
@given(when=st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9998, 12, 31)),
       digits=st.sampled_from([0, 3, 6]))
def test_s3s_timestamp_forms_parse_as_botocore_parses_them(when: datetime, digits: int) -> None:
    """ISO 8601 in UTC with 0, 3 or 6 fractional digits (XML bodies) and RFC 1123 (headers):
    the same instant as botocore's own parser gives, always aware. (CI: 200 examples, ~0.3 s.)"""
    fraction = f".{when.microsecond:06d}"[:digits + 1] if digits else ""
    iso = when.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"
    rfc = format_datetime(when.replace(tzinfo=timezone.utc), usegmt=True)
    for text in (iso, rfc):
        ours, theirs = parse_timestamp(text), botocore_parse(text)
        assert ours == theirs and ours.utcoffset() == timedelta(0), (text, ours, theirs)


def test_other_forms_fall_back_to_botocore() -> None:
    for value in (1700000000, "1700000000", "2026-11-27T22:20:35+01:00", "2026-11-27 22:20:35"):
        assert parse_timestamp(value) == botocore_parse(value), value
