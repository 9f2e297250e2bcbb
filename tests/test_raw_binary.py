"""Binary raw evidence: `cclg raw` keeps any bytes with their MIME type and SHA-256; a memory cites a
screenshot or a HAR with `cclg add --raw`; `cite`, `grep --raw`, packs (every format, the hook's
too), MCP and the web view name a binary file and never print its bytes."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cclg import api, mcp_tools
from cclg.cli import cli
from cclg.core import media
from cclg.core.store import Store
from cclg.ui import pages


def run(root: Path, *args: str, input: bytes | None = None) -> Result:
    return CliRunner().invoke(cli, ["--root", str(root), *args], input=input, catch_exceptions=False)


def png(width: int = 2, height: int = 2) -> bytes:
    """A real PNG: signature, IHDR, one IDAT of grey pixels, IEND."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    rows = b"".join(b"\x00" + b"\x80\x00\xff" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


HAR = {
    "log": {
        "version": "1.2",
        "creator": {"name": "browser", "version": "1"},
        "entries": [{"request": {"method": "POST", "url": "https://app.test/login"}, "response": {"status": 500}}],
    }
}


@pytest.fixture
def kept(tmp_path: Path) -> tuple[Path, dict[str, dict[str, object]]]:
    """A store holding a screenshot, a HAR and random bytes, kept through the real CLI."""
    root = tmp_path / "store"
    assert run(root, "init").exit_code == 0
    shot = tmp_path / "failing-login.png"
    shot.write_bytes(png())
    har = tmp_path / "login.har"
    har.write_text(json.dumps(HAR))
    blob = tmp_path / "core.dump"
    blob.write_bytes(bytes(range(256)) * 4 + b"\xff\xfe\x00PNG")
    found = {}
    for path in (shot, har, blob):
        result = run(root, "raw", str(path), "--json")
        assert result.exit_code == 0, result.output
        found[path.name] = json.loads(result.stdout)
    return root, found


def test_raw_keeps_any_bytes_with_their_mime_type_and_sha256(kept: tuple[Path, dict]) -> None:
    root, found = kept
    shot, har, blob = found["failing-login.png"], found["login.har"], found["core.dump"]
    assert (shot["mime"], har["mime"], blob["mime"]) == ("image/png", "application/har+json", OCTET)
    for info in found.values():
        data = (root / info["path"]).read_bytes()
        assert info["sha256"] == hashlib.sha256(data).hexdigest() and info["bytes"] == len(data)
    assert (root / blob["path"]).read_bytes() == bytes(range(256)) * 4 + b"\xff\xfe\x00PNG"  # verbatim
    record = json.loads((root / "raw_records" / f"{Path(shot['path']).name}.json").read_text())
    assert record["mime"] == "image/png" and record["sha256"] == shot["sha256"]
    again = run(root, "raw", "-", "--name", "again.png", "--json", input=png())
    assert json.loads(again.stdout)["sha256"] == shot["sha256"]  # the same bytes, once per name
    assert len(Store.open(root).raw_files()) == 4  # the records are no evidence


OCTET = "application/octet-stream"


def test_mime_is_given_or_read_from_magic_bytes_then_the_name() -> None:
    assert media.sniff(png(), "no-extension") == "image/png"
    assert media.sniff(b"%PDF-1.7\n...", "x.txt") == "application/pdf"  # the bytes win over the name
    assert media.sniff(b"GIF89a....", "") == "image/gif"
    assert media.sniff(b"RIFF\x00\x00\x00\x00WEBPVP8 ", "") == "image/webp"
    assert media.sniff(b"plain words", "notes") == "text/plain"
    assert media.sniff(b"a\x00b", "notes.txt") == OCTET  # a NUL is no text, whatever the name says
    assert media.sniff("déjà".encode("latin-1"), "old.log") == "text/plain"  # a text file in another encoding
    assert media.checked_mime(" Image/PNG ") == "image/png"
    with pytest.raises(api.UsageError, match="not a MIME type"):
        media.checked_mime("png")


def test_mime_option_is_kept_and_a_bad_one_refused(tmp_path: Path) -> None:
    root = tmp_path / "s"
    run(root, "init")
    given = run(root, "raw", "-", "--name", "trace", "--mime", "application/vnd.tcpdump.pcap", "--json", input=b"\xd4")
    assert json.loads(given.stdout)["mime"] == "application/vnd.tcpdump.pcap"
    name = json.loads(given.stdout)["path"].split("/", 1)[1]
    assert api.raw_info(Store.open(root), name)["mime"] == "application/vnd.tcpdump.pcap"
    bad = run(root, "raw", "-", "--mime", "not a type", input=b"x")
    assert bad.exit_code == 2 and "not a MIME type" in bad.output
    assert len(Store.open(root).raw_files()) == 1  # nothing written for the refused one


def cited_memory(root: Path, found: dict[str, dict]) -> str:
    shot, har = found["failing-login.png"]["path"], found["login.har"]["path"]
    result = run(
        root, "add", "--content", "The login page answers 500 on submit", "--source", "user",
        "--raw", shot, "--raw", har.split("/", 1)[1], "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    node_id: str = json.loads(result.stdout)["node"]["id"]
    return node_id


def test_a_memory_cites_a_screenshot_and_a_har_and_cite_names_the_binary(kept: tuple[Path, dict]) -> None:
    root, found = kept
    node_id = cited_memory(root, found)
    cited = json.loads(run(root, "cite", node_id, "--json").stdout)
    shot, har = cited["raw_spans"]
    assert shot["text"] is None and shot["binary"] == {
        "raw": Path(found["failing-login.png"]["path"]).name,
        "mime": "image/png",
        "bytes": found["failing-login.png"]["bytes"],
        "sha256": found["failing-login.png"]["sha256"],
    }
    assert json.loads(har["text"]) == HAR and "binary" not in har  # JSON text: shown, as text
    text = run(root, "cite", node_id).stdout
    assert "PNG" not in text and "IHDR" not in text and "image/png" in text
    node = api.show(Store.open(root), node_id)
    assert node.metadata["attachments"] == [shot["binary"]]
    missing = run(root, "add", "--content", "x y z", "--source", "user", "--raw", "raw/none.png")
    assert missing.exit_code == 5 and "no raw file" in missing.output


@pytest.mark.parametrize("fmt", ["markdown", "json", "toml"])
def test_packs_name_binary_evidence_and_never_inline_it(kept: tuple[Path, dict], fmt: str) -> None:
    root, found = kept
    node_id = cited_memory(root, found)
    out = run(root, "pack", "--query", "login page answers 500", "--format", fmt).stdout
    assert node_id in out
    assert found["failing-login.png"]["sha256"][:16] in out and "image/png" in out
    assert "IHDR" not in out and "\x89" not in out and "\\u0089" not in out


def test_the_hook_pack_names_the_screenshot(kept: tuple[Path, dict], tmp_path: Path) -> None:
    root, found = kept
    node_id = cited_memory(root, found)
    payload = {"session_id": "s-bin", "prompt": "why does the login page answer 500", "cwd": str(tmp_path)}
    env = {**os.environ, "CCLG_HOME": str(root)}
    done = subprocess.run(
        [sys.executable, "-m", "cclg.hook", "user-prompt"], input=json.dumps(payload), capture_output=True,
        text=True, env=env, check=True,
    )  # fmt: skip
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert node_id in context and "attached, not shown: raw/failing-login-" in context and "IHDR" not in context


def test_grep_mcp_and_the_web_view_never_print_binary(kept: tuple[Path, dict]) -> None:
    root, found = kept
    node_id = cited_memory(root, found)
    grep = run(root, "grep", "--raw", "PNG")
    assert "failing-login" not in grep.stdout and "core-" not in grep.stdout
    assert "raw/login-" in run(root, "grep", "--raw", "app.test").stdout  # text evidence is searched
    store = Store.open(root)
    cited = mcp_tools.memory_cite(store, node_id)
    assert cited["raw_spans"][0]["text"] is None and cited["raw_spans"][0]["binary"]["mime"] == "image/png"
    matches = mcp_tools.memory_grep(store, "PNG", raw=True)["matches"]
    assert not matches
    html = str(pages._provenance(api.cite(store, node_id)))
    assert "Binary raw evidence raw/failing-login-" in html and "image/png" in html and "IHDR" not in html


def test_a_foreign_attachment_entry_that_is_not_well_formed_is_never_shown() -> None:
    good = media.attachment("shot-1.png", 10, "a" * 64, "image/png")
    metadata = {
        "attachments": [
            good,
            {**good, "raw": "../../etc/passwd"},
            {**good, "mime": "text/html\n<script>"},
            {**good, "bytes": True},
            {**good, "sha256": "zz"},
            "a string",
        ]
    }
    assert media.attachments_of(metadata) == [good]
    assert media.attachments_of({"attachments": "x"}) == []
