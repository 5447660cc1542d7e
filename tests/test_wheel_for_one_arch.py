"""tools/wheel_for_one_arch.py on synthetic fatbins and a synthetic wheel.

A fatbin is built here with the header layout the tool parses (magic, version, header size,
entries size; entries: kind, version, header size, payload size, ..., the sm number at byte 28).
"""

from __future__ import annotations

import struct
import subprocess
import sys
import zipfile
from pathlib import Path

from tool_module import load_tool

tool = load_tool("wheel_for_one_arch")

ENTRY_HEADER = 64


def _entry(kind: int, arch: int, payload: bytes) -> bytes:
    head = bytearray(ENTRY_HEADER)
    struct.pack_into("<HHIQ", head, 0, kind, 0x101, ENTRY_HEADER, len(payload))
    struct.pack_into("<I", head, 28, arch)
    return bytes(head) + payload


def _fatbin(entries: list[bytes]) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", tool.FATBIN_MAGIC, 1, 16, len(body)) + body


def _payload(tag: int, n: int = 96) -> bytes:
    return bytes((tag + i) % 251 + 1 for i in range(n))  # no zero byte


def test_only_the_named_arch_keeps_its_code() -> None:
    sm80, sm90, ptx, sm100 = _payload(1), _payload(2), _payload(3), _payload(4)
    whole = _fatbin([_entry(2, 80, _payload(5)), _entry(1, 120, _payload(6))])  # no sm_90 code
    blob = (
        b"ELF-prefix"
        + _fatbin([_entry(2, 80, sm80), _entry(2, 90, sm90), _entry(1, 120, ptx)])
        + b"\x50\xed\x55\xba-not-a-fatbin"  # the magic inside other bytes
        + _fatbin([_entry(2, 100, sm100), _entry(2, 90, sm90)])
        + whole
    )
    data = bytearray(blob)
    zeroed, kept, left_whole = tool.keep_one_arch(data, 90)
    assert len(data) == len(blob)  # same length: offsets and sizes unchanged
    assert (zeroed, kept, left_whole) == (3 * 96, 2 * 96, 1)
    assert data.count(sm90) == 2
    for gone in (sm80, ptx, sm100):
        assert gone not in data
    assert whole in data  # a fatbin without sm_90 machine code is left as it was
    assert data.startswith(b"ELF-prefix") and b"-not-a-fatbin" in data
    # every byte outside the zeroed payloads is unchanged
    changed = [i for i in range(len(blob)) if blob[i] != data[i]]
    assert len(changed) <= zeroed and all(data[i] == 0 for i in changed)


def test_repacked_wheel_is_installable_and_labelled(tmp_path: Path) -> None:
    lib = b"\x7fELF" + _fatbin([_entry(2, 80, _payload(7)), _entry(2, 90, _payload(8))])
    src = tmp_path / "demo_lib-1.2.3-py3-none-any.whl"
    info = "demo_lib-1.2.3.dist-info"
    with zipfile.ZipFile(src, "w") as z:
        z.writestr("demo_lib/__init__.py", "VALUE = 1\n")
        z.writestr("demo_lib/lib/libdemo.so.1", lib)
        z.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: demo-lib\nVersion: 1.2.3\n")
        wheel = "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        z.writestr(f"{info}/WHEEL", wheel)
        z.writestr(f"{info}/RECORD", "")
    out = tool.repack(src, 90, tmp_path)
    assert out.name == "demo_lib-1.2.3+sm90-py3-none-any.whl"
    with zipfile.ZipFile(out) as z:
        names = z.namelist()
        assert "demo_lib-1.2.3+sm90.dist-info/METADATA" in names
        assert "Version: 1.2.3+sm90" in z.read("demo_lib-1.2.3+sm90.dist-info/METADATA").decode()
        stripped = z.read("demo_lib/lib/libdemo.so.1")
        assert len(stripped) == len(lib) and _payload(8) in stripped and _payload(7) not in stripped
        record = z.read("demo_lib-1.2.3+sm90.dist-info/RECORD").decode()
        assert f"demo_lib/lib/libdemo.so.1,{tool._record_hash(stripped)},{len(stripped)}" in record
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--target",
            str(target),
            str(out),
        ],
        check=True,
        timeout=120,
    )
    assert (target / "demo_lib" / "lib" / "libdemo.so.1").read_bytes() == stripped
