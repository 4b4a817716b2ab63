"""The S3-compatible storage against a real local S3 server (moto's server mode on a free port, spoken to over
HTTP by boto3: no mocked client): upload through the API, ranged downloads, restore's existence check, purge and
the orphan sweep, selected by MEETING_ATTACHMENT_STORAGE=s3."""

from __future__ import annotations

import contextlib
import socket
from datetime import timedelta

import boto3
import httpx
import pytest
from moto.server import ThreadedMotoServer

from tenet.app import create_app
from tenet.kernel.jobs import JobRuntime, run_now
from tenet.meetings.agenda import storage
from tenet.meetings.agenda import tasks as agenda_tasks
from tests.conftest import test_settings
from tests.meetings.agenda.conftest import PDF, AgendaApi, make_world, storage_files
from tests.meetings.conftest import MeetingApi
from tests.support.users import UserFactory

BUCKET = "tenet-attachments"


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_settings(s3_endpoint, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
        client.create_bucket(Bucket=BUCKET)
    for entry in client.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        client.delete_object(Bucket=BUCKET, Key=entry["Key"])
    return test_settings(data_dir=tmp_path, meeting_attachment_storage="s3", meeting_attachment_s3_bucket=BUCKET,
                         meeting_attachment_s3_endpoint_url=s3_endpoint, meeting_attachment_s3_region="us-east-1")


@pytest.fixture
async def s3_client(s3_settings, db, clock):
    app = create_app(s3_settings, database=db, clock=clock, run_background_tasks=False)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield app, client


def _keys(endpoint: str) -> list[str]:
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    return sorted(e["Key"] for e in client.list_objects_v2(Bucket=BUCKET).get("Contents", []))


async def test_files_live_in_the_bucket_and_come_back_by_range(s3_client, s3_endpoint, s3_settings, db, clock,
                                                              rules_hold):
    app, client = s3_client
    assert isinstance(storage.of(app.state), storage.S3Storage)
    ma = MeetingApi(client, app, clock)
    api = AgendaApi(ma)
    world = await make_world(ma, UserFactory(app, db, clock))
    section = await api.section(world.manager, world.meeting_id)
    item = await api.item(world.manager, section["id"])
    data = b"%PDF-" + bytes(range(256)) * 4096
    uploaded = await api.upload(world.manager, item["id"], data, filename="会议纪要 v2.pdf")
    assert uploaded.status_code == 201, uploaded.text
    body = uploaded.json()
    assert _keys(s3_endpoint) == [f"agenda-item/2026/01/{body['id']}"]
    assert storage_files(storage.temp_dir(s3_settings)) == []
    whole = await client.get(body["download_url"], headers=ma.headers(world.alice))
    assert whole.status_code == 200 and whole.content == data
    part = await client.get(body["download_url"], headers=ma.headers(world.alice, Range="bytes=1000-1999"))
    assert part.status_code == 206 and part.content == data[1000:2000]

    await api.ok("DELETE", f"/attachments/agenda-item/{body['id']}", world.manager, 204)
    await api.ok("POST", f"/attachments/agenda-item/{body['id']}/restore", world.admin, 204)
    await api.ok("DELETE", f"/attachments/agenda-item/{body['id']}", world.manager, 204)
    clock.advance(timedelta(days=31))
    runtime = JobRuntime(db=db, clock=clock, settings=s3_settings)
    counts = await run_now(agenda_tasks.purge_deleted_agenda, runtime, timestamp=0)
    assert counts["meeting_agenda_item_attachments"] == 1 and _keys(s3_endpoint) == []
    await rules_hold()


async def test_the_sweeper_deletes_bucket_objects_no_row_names(s3_endpoint, s3_settings, db, monkeypatch):
    store = storage.build(s3_settings)
    temp = storage.temp_dir(s3_settings)
    temp.mkdir(parents=True, exist_ok=True)
    (temp / "x.part").write_bytes(PDF)
    await store.commit(temp / "x.part", "meeting/2026/01/00000000-0000-4000-8000-000000000001")
    assert not (temp / "x.part").exists()
    assert await store.exists("meeting/2026/01/00000000-0000-4000-8000-000000000001")
    fresh = await agenda_tasks.sweep(db, store, temp)
    assert fresh["orphan_files"] == 0
    # A day later (as the bucket dates objects): nothing names it, so it goes.
    monkeypatch.setattr(agenda_tasks, "ORPHAN_MIN_AGE", timedelta(seconds=-60))
    swept = await agenda_tasks.sweep(db, store, temp)
    assert swept["orphan_files"] == 1 and _keys(s3_endpoint) == []
