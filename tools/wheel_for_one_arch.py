#!/usr/bin/env python3
"""Shrink a CUDA library wheel to the code one GPU architecture runs, for a size-limited transfer.

The device machine of this project receives at most 64 MiB per call, and NCCL 2.29's wheel
(which cuBLASMp >= 0.8 needs) is 191 MiB: ``libnccl.so.2`` carries device code for sm_75 to
sm_120. This tool rewrites every shared library of a wheel so that, in each embedded fatbin
(CUDA's container of device code, magic ``0xBA55ED50``), the payloads of the entries compiled for
other architectures are zeroed, and repacks the wheel with LZMA (which the zeros then cost
nothing). Entry headers, sizes and offsets are unchanged: the library is byte-for-byte the same
length, the CUDA driver still sees every entry and picks the one of the GPU it runs on, whose
bytes are untouched. A fatbin without an entry for ``--arch`` is left whole.

The result is for one machine's GPU only (a library stripped for sm_90 fails on other GPUs
when it loads kernels); its version gets a local label (``+sm90``) so that it is never mistaken
for the published wheel. NCCL 2.29.2 for sm_90: 191 MiB -> 35 MiB.

Usage:  tools/wheel_for_one_arch.py WHEEL --arch 90 [--out DIR]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import struct
import sys
import zipfile
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50
_FATBIN_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries
_ENTRY_HEADER = struct.Struct("<HHIQ")  # kind (1 PTX, 2 ELF), version, header size, payload size
_ENTRY_ARCH_OFFSET = 28  # uint32: the sm number (90 for sm_90)


def keep_one_arch(data: bytearray, arch: int) -> tuple[int, int, int]:
    """Zero, in place, the payloads of the fatbin entries of ``data`` not built for ``arch``.

    Returns ``(bytes zeroed, bytes kept, fatbins left whole)``; a fatbin is left whole when it has
    no machine code (ELF entry) for ``arch``.
    """
    magic = struct.pack("<I", FATBIN_MAGIC)
    zeroed = kept = whole = 0
    pos = 0
    while (start := data.find(magic, pos)) >= 0:
        _, _, header_size, size = _FATBIN_HEADER.unpack_from(data, start)
        if header_size != _FATBIN_HEADER.size or start + header_size + size > len(data):
            pos = start + 4  # the magic number inside other bytes, not a fatbin
            continue
        entries = []
        at, end = start + header_size, start + header_size + size
        while at + _ENTRY_HEADER.size <= end:
            kind, _, entry_header, payload = _ENTRY_HEADER.unpack_from(data, at)
            if entry_header == 0:
                break
            (entry_arch,) = struct.unpack_from("<I", data, at + _ENTRY_ARCH_OFFSET)
            entries.append((kind, entry_arch, at + entry_header, payload))
            at += entry_header + payload
        if not any(kind == 2 and a == arch for kind, a, _, _ in entries):
            whole += 1
        else:
            for _, a, payload_at, payload in entries:
                if a == arch:
                    kept += payload
                else:
                    data[payload_at : payload_at + payload] = bytes(payload)
                    zeroed += payload
        pos = end
    return zeroed, kept, whole


def _record_hash(blob: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(blob).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def repack(wheel: Path, arch: int, out_dir: Path) -> Path:
    """Write ``wheel`` stripped to ``arch`` into ``out_dir`` (see the module docstring)."""
    name, version, *rest = wheel.name[: -len(".whl")].split("-")
    label = f"{version}+sm{arch}"
    out = out_dir / ("-".join([name, label, *rest]) + ".whl")
    old_info, new_info = f"{name}-{version}.dist-info", f"{name}-{label}.dist-info"
    records: list[str] = []
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_LZMA) as dst:
        for item in src.infolist():
            path = item.filename.replace(old_info, new_info, 1)
            blob = src.read(item)
            if path.endswith("/RECORD"):
                continue
            if path.endswith("/METADATA"):
                old, new = f"Version: {version}\n", f"Version: {label}\n"
                blob = blob.replace(old.encode(), new.encode())
            elif ".so" in Path(path).name:
                data = bytearray(blob)
                zeroed, kept, whole = keep_one_arch(data, arch)
                if zeroed:
                    print(
                        f"{path}: zeroed {zeroed >> 20} MiB of other architectures, kept "
                        f"{kept >> 20} MiB for sm_{arch}; {whole} fatbin(s) without sm_{arch} code "
                        "left whole"
                    )
                blob = bytes(data)
            info = zipfile.ZipInfo(path, date_time=item.date_time)
            info.external_attr = item.external_attr
            dst.writestr(info, blob, zipfile.ZIP_LZMA)
            records.append(f"{path},{_record_hash(blob)},{len(blob)}")
        records.append(f"{new_info}/RECORD,,")
        dst.writestr(f"{new_info}/RECORD", "\n".join(records) + "\n", zipfile.ZIP_LZMA)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--arch", type=int, required=True, help="sm number to keep, e.g. 90")
    parser.add_argument("--out", type=Path, default=Path("."), help="output folder")
    args = parser.parse_args(argv)
    out = repack(args.wheel, args.arch, args.out)
    print(f"{out} ({out.stat().st_size >> 20} MiB; {args.wheel.stat().st_size >> 20} MiB before)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
