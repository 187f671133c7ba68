#!/usr/bin/python3
"""Writes the fuzzer's seed corpus (fuzz/corpus: valid requests, one frame
body each) and the inputs THREATS.md names (fuzz/regress), so both can be
made again.  Uses Debian's python3-msgpack: run it with /usr/bin/python3.
Inputs libFuzzer finds go into fuzz/regress by hand, under a name saying
what they broke."""
import os
import struct

import msgpack

HERE = os.path.dirname(os.path.abspath(__file__))

SEEDS = {
    "argv": {"id": 1, "argv": ["/bin/echo", "hello"]},
    "shell": {"id": 2, "shell": "echo hi; exit 3"},
    "everything": {
        "id": 3, "argv": ["/bin/cat"], "cwd": "sub/dir", "env": {"A": "1", "B": ""},
        "stdin": b"input bytes\x00\xff", "timeout": 2.5, "max_output": 4096,
        "policy": {
            "writable": ["/tmp/a", "/tmp/b"], "deny_write": ["/tmp/a/.git"],
            "deny_read": ["/etc/shadow"], "network": "none", "memory": 1 << 28,
            "file_size": 1 << 20, "cpus": 0.5, "cpu_seconds": 10, "processes": 64,
            "open_files": 256, "memory_strategy": "kernel",
        },
    },
    "absolute_cwd": {"id": 4, "argv": ["/bin/pwd"], "cwd": "/tmp"},
    "empty_policy": {"id": 5, "shell": "true", "policy": {}},
    "timeout_int": {"id": 6, "argv": ["/bin/sleep", "1"], "timeout": 5},
    "stdin_str": {"id": 7, "argv": ["/bin/cat"], "stdin": "text"},
    "big_id": {"id": (1 << 64) - 1, "argv": ["/bin/true"]},
    "dash_program": {"id": 8, "argv": ["-x", "--help"]},
    "many_args": {"id": 9, "argv": ["/bin/echo"] + ["arg%d" % i for i in range(200)]},
    "many_env": {"id": 10, "shell": "env", "env": {"V%d" % i: "x" * i for i in range(50)}},
    "writable_only": {"id": 11, "shell": "true", "policy": {"writable": ["/tmp"]}},
    "network_full": {"id": 12, "shell": "true", "policy": {"network": "full"}},
}

# Each name says what the input tries; the decoder must refuse them all.
def regress():
    ok = msgpack.packb({"id": 1, "argv": ["/bin/true"]})
    deep = b"\x91" * 1000 + b"\xc0"
    yield "map32_4294967295", b"\xdf\xff\xff\xff\xff"
    yield "array32_4294967295", b"\xdd\xff\xff\xff\xff"
    yield "str32_4294967295", b"\xdb\xff\xff\xff\xff"
    yield "bin32_4294967295", b"\xc6\xff\xff\xff\xff"
    yield "argv_array32_4294967295", b"\x82\xa2id\x01\xa4argv\xdd\xff\xff\xff\xff"
    yield "c1_alone", b"\xc1"
    yield "c1_as_id", b"\x82\xa2id\xc1\xa5shell\xa1x"
    yield "trailing_garbage", ok + b"\x00"
    yield "truncated", ok[:-3]
    yield "deep_nesting", deep
    yield "deep_in_policy", b"\x83\xa2id\x01\xa5shell\xa1x\xa6policy" + b"\x81\xa1a" * 20 + b"\xc0"
    yield "ext_type", b"\x81\xa2id\xd4\x01\x00"
    yield "empty", b""
    yield "nul_in_argv", msgpack.packb({"id": 1, "argv": ["/bin/ec\x00ho"]})
    yield "nul_in_env", msgpack.packb({"id": 1, "argv": ["a"], "env": {"A": "x\x00"}})
    yield "dotdot_cwd", msgpack.packb({"id": 1, "argv": ["a"], "cwd": "../.."})
    yield "duplicate_id", b"\x83\xa2id\x01\xa2id\x02\xa5shell\xa1x"
    yield "negative_memory", msgpack.packb({"id": 1, "shell": "x", "policy": {"memory": -1}})
    yield "overflowing_processes", msgpack.packb(
        {"id": 1, "shell": "x", "policy": {"processes": (1 << 64) - 1}})
    yield "nan_timeout", msgpack.packb({"id": 1, "shell": "x", "timeout": float("nan")})
    yield "empty_argv", msgpack.packb({"id": 1, "argv": []})
    yield "unknown_key", msgpack.packb({"id": 1, "shell": "x", "bogus": 1})
    yield "invalid_utf8_key", b"\x82\xa2id\x01\xa3\xff\xfe\xfd\x01"
    # Policy lists past their bounds: the 26-second request of the review
    # (16 deny_read paths 1000 components deep), too many paths, too many
    # components in all, too many bytes in all.
    yield "deep_deny_read", msgpack.packb({"id": 1, "argv": ["/bin/true"], "policy": {
        "deny_read": ["/ws/x%d" % i + "/a" * 1000 for i in range(16)]}})
    yield "many_deny_write", msgpack.packb({"id": 1, "shell": "x", "policy": {
        "deny_write": ["/p%d" % i for i in range(65)]}})
    yield "writable_components", msgpack.packb({"id": 1, "shell": "x", "policy": {
        "writable": ["/p%d" % i + "/a" * 63 for i in range(5)]}})
    yield "deny_read_bytes", msgpack.packb({"id": 1, "shell": "x", "policy": {
        "deny_read": ["/" + "b" * 3999 for _ in range(17)]}})


def write(directory, name, data):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def main():
    for name, request in SEEDS.items():
        write(os.path.join(HERE, "corpus"), name, msgpack.packb(request, use_bin_type=True))
    for name, data in regress():
        write(os.path.join(HERE, "regress"), name, data)


if __name__ == "__main__":
    main()
