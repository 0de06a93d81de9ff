"""Cluster files that are not what they should be: every one is a ``ClusterConfigError``
naming the file and the fix, and ``python -m dtf.cluster.server`` exits 2 with one line for it
(issue 19). In-process, tmp_path files only, no servers."""

from __future__ import annotations

import codecs
import json

import pytest

from dtf.cluster import ClusterConfigError, load, server
from dtf.cluster.spec import MAX_COUNT, parse_json

SPEC = {"worker": ["127.0.0.1:2222", "127.0.0.1:2223"]}
TEXT = json.dumps(SPEC, indent=1)


def _refused(path, *parts: str) -> str:
    with pytest.raises(ClusterConfigError) as info:
        load(path)
    message = str(info.value)
    assert "\n" not in message
    for part in parts:
        assert part in message, message
    return message


# --------------------------------------------------------------------------- encodings


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_a_utf16_file_as_powershell_writes_it_names_the_command_that_saves_utf8(tmp_path, encoding):
    path = tmp_path / "cluster.json"
    data = TEXT.encode(encoding)
    if encoding == "utf-16-le":  # what Windows PowerShell's '>' writes: BOM + UTF-16-LE
        data = codecs.BOM_UTF16_LE + data
    elif encoding == "utf-16-be":
        data = codecs.BOM_UTF16_BE + data
    path.write_bytes(data)
    if encoding == "utf-32":
        _refused(path, str(path), "is UTF-32 text, not UTF-8", "Out-File -Encoding utf8")
        return
    _refused(
        path,
        str(path),
        "is UTF-16 text, not UTF-8 (Windows PowerShell 5.1's '>' and Out-File write UTF-16",
        "Out-File -Encoding utf8",
        "Set-Content -Encoding utf8",
    )


def test_utf16_without_a_byte_order_mark_is_recognised_by_its_nul_bytes(tmp_path):
    path = tmp_path / "cluster.json"
    path.write_bytes(TEXT.encode("utf-16-le"))
    _refused(path, str(path), "NUL bytes", "not UTF-8", "Out-File -Encoding utf8")


def test_a_latin1_file_names_the_byte_its_position_and_the_fix(tmp_path):
    path = tmp_path / "cluster.json"
    path.write_bytes('{"worker": ["127.0.0.1:2222"],\n "café": 1}'.encode("latin-1"))
    _refused(path, str(path), "not UTF-8 text", "byte 0xe9 at line 2 column 6", "save it as UTF-8")


def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    # Windows PowerShell 5.1's `Out-File -Encoding utf8` (the fix the messages give) writes
    # one, so refusing it would refuse the fixed file.
    path = tmp_path / "cluster.json"
    path.write_bytes(codecs.BOM_UTF8 + TEXT.encode())
    assert load(path) == SPEC
    path.write_bytes(codecs.BOM_UTF8 + b'{"worker": ["\xe9"]}')
    _refused(path, "byte 0xe9 at line 1 column 14")  # positions count from the file's start


# --------------------------------------------------------------------------- JSON


@pytest.mark.parametrize(
    "text, key",
    [
        ('{"worker": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223"]}', "worker"),
        ('{"worker": 1, "ps": 1, "ps": 2}', "ps"),
        ('{"worker": [{"a": 1, "a": 2}]}', "a"),  # anywhere, not only at the top
    ],
)
def test_a_key_given_twice_is_refused_and_named(tmp_path, text, key):
    path = tmp_path / "cluster.json"
    path.write_text(text)
    _refused(path, str(path), f"has the key {key!r} twice", "merge")
    with pytest.raises(ClusterConfigError, match=f"--cluster-json has the key '{key}' twice"):
        parse_json(text, source="--cluster-json")


@pytest.mark.parametrize(
    "text", ['{"worker": ' + "1" * 5000 + "}", "[" * 100_000], ids=["5000 digits", "deep"]
)
def test_json_the_parser_cannot_hold_is_a_config_error(tmp_path, text):
    path = tmp_path / "cluster.json"
    path.write_text(text)
    _refused(path, str(path))


# --------------------------------------------------------------------------- paths


def test_a_directory_is_not_reported_as_missing(tmp_path):
    message = _refused(tmp_path, "is a directory, not a cluster file", "cluster.json")
    assert "does not exist" not in message


def test_an_unreadable_file_is_a_config_error(tmp_path, monkeypatch):
    path = tmp_path / "cluster.json"
    path.write_text(TEXT)

    def denied(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(type(path), "read_bytes", denied)
    _refused(path, str(path), "cannot be read (Permission denied)")


# --------------------------------------------------------------------------- the task limit


def _addresses(n: int, host: str = "127.0.0.1") -> list[str]:
    return [f"{host}:{2000 + i}" for i in range(n)]


def test_addresses_and_counts_on_this_machine_obey_one_limit(tmp_path):
    too_many = f"asks for {MAX_COUNT + 1} tasks on this machine; at most {MAX_COUNT}"
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"worker": _addresses(MAX_COUNT + 1)}))
    message = _refused(path, too_many, "the course's limit", "~44 MB", "~0.75 GB")
    assert "each TensorFlow server takes" not in message  # the old reason, false when forked
    with pytest.raises(ClusterConfigError, match=too_many):
        load({"worker": MAX_COUNT + 1})
    with pytest.raises(ClusterConfigError, match=too_many):  # counts and addresses add up
        load({"worker": _addresses(MAX_COUNT), "ps": 1})
    assert len(load({"worker": _addresses(MAX_COUNT - 1), "ps": 1})["worker"]) == MAX_COUNT - 1


def test_tasks_on_other_hosts_do_not_count(tmp_path):
    # A real cluster's file lists every machine: only this machine's tasks run here.
    spec = {"worker": _addresses(50, "worker.example"), "ps": ["ps.example:2222"]}
    assert load(spec)["worker"] == spec["worker"]


def test_a_count_too_big_to_build_is_refused_at_once():
    with pytest.raises(ClusterConfigError, match="asks for 1000000000000 tasks"):
        load({"worker": 10**12})


# --------------------------------------------------------------------------- the CLI


@pytest.mark.parametrize(
    "data, message",
    [
        (codecs.BOM_UTF16_LE + TEXT.encode("utf-16-le"), "is UTF-16 text, not UTF-8"),
        (TEXT.replace("worker", "wörker").encode("latin-1"), "is not UTF-8 text"),
        (b'{"worker": 1, "worker": 2}', "has the key 'worker' twice"),
        (json.dumps({"worker": _addresses(MAX_COUNT + 1)}).encode(), "at most"),
    ],
    ids=["utf-16", "latin-1", "duplicate key", "too many addresses"],
)
def test_the_server_cli_exits_2_with_one_line(tmp_path, capsys, data, message):
    path = tmp_path / "cluster.json"
    path.write_bytes(data)
    assert server.main(["--config", str(path), "--job", "worker"]) == server.EXIT_USAGE
    err = capsys.readouterr().err
    *usage, last = err.strip().splitlines()  # argparse's usage lines, then the one error line
    assert last.startswith("dtf-server: error: ") and message in last, err
    assert usage[0].startswith("usage: ") and "Traceback" not in err, err


def test_the_server_cli_names_a_directory(tmp_path, capsys):
    assert server.main(["--config", str(tmp_path), "--job", "worker"]) == server.EXIT_USAGE
    assert "is a directory, not a cluster file" in capsys.readouterr().err
