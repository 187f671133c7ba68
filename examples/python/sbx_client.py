#!/usr/bin/python3
"""A small client of `sbx serve` (the msgpack wire protocol of DESIGN.md).

    sbx_client.py --socket PATH [--count N]
    sbx_client.py --sbx PATH-TO-SBX [--count N] [-- SERVE OPTIONS...]

With --socket it connects to `sbx serve --listen unix:PATH`; with --sbx it
starts `sbx serve --stdio` itself and talks over its stdin and stdout.  It
sends N requests (default 100) at once over that one connection, then
checks that every response carries the id of one request and the output and
exit code that request asked for.  Exit status 0 when all match.

Uses Debian's python3-msgpack; run it with /usr/bin/python3.
"""
import argparse
import asyncio
import itertools
import struct
import sys

import msgpack


class ServeError(Exception):
    """An error response: code is one of sbx serve's error codes."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class Client:
    """Requests go out as soon as they are made; responses come back in
    completion order and are matched to their request by id."""

    def __init__(self, reader, writer):
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)
        self._waiting = {}
        self._task = asyncio.ensure_future(self._read_responses())

    async def _read_responses(self):
        try:
            while True:
                header = await self._reader.readexactly(4)
                (length,) = struct.unpack(">I", header)
                body = await self._reader.readexactly(length)
                response = msgpack.unpackb(body, raw=False)
                future = self._waiting.pop(response.get("id"), None)
                if future is None:
                    raise RuntimeError(f"a response with an unknown id: {response!r}")
                if "error" in response:
                    error = response["error"]
                    future.set_exception(ServeError(error["code"], error["message"]))
                else:
                    future.set_result(response["result"])
        except asyncio.IncompleteReadError:
            error = ConnectionError("sbx serve closed the connection")
        except Exception as e:  # a bad frame ends the client the same way
            error = e
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(error)
        self._waiting.clear()

    async def run(self, argv=None, shell=None, **fields):
        """Runs one command; returns the result map (DESIGN.md's JSON keys)."""
        request_id = next(self._ids)
        request = {"id": request_id, **fields}
        if shell is not None:
            request["shell"] = shell
        else:
            request["argv"] = list(argv)
        body = msgpack.packb(request, use_bin_type=True)
        future = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        self._writer.write(struct.pack(">I", len(body)) + body)
        await self._writer.drain()
        return await future

    async def close(self):
        self._writer.close()
        self._task.cancel()


async def connect_socket(path):
    reader, writer = await asyncio.open_unix_connection(path)
    return Client(reader, writer), None


async def spawn_stdio(sbx, options):
    proc = await asyncio.create_subprocess_exec(
        sbx, "serve", "--stdio", *options,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    return Client(proc.stdout, proc.stdin), proc


def expected(i):
    """What request i asks for: its own text on stdout, its own exit code."""
    return f"request {i}", i % 7


async def one(client, i):
    text, code = expected(i)
    if i % 2:
        # Half of them send their text on stdin and get it back from cat.
        result = await client.run(["/bin/sh", "-c", "cat; exit $0", str(code)],
                                  stdin=text.encode(), timeout=30)
    else:
        result = await client.run(shell=f"printf '%s' '{text}'; exit {code}", timeout=30)
    return i, result


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--socket", help="the unix socket of sbx serve --listen")
    where.add_argument("--sbx", help="start SBX serve --stdio")
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("options", nargs="*", help="options for sbx serve --stdio")
    args = parser.parse_args()

    if args.socket:
        client, proc = await connect_socket(args.socket)
    else:
        client, proc = await spawn_stdio(args.sbx, args.options)

    done = await asyncio.gather(*(one(client, i) for i in range(args.count)),
                                return_exceptions=True)
    bad = 0
    for i, item in enumerate(done):
        if isinstance(item, BaseException):
            print(f"request {i}: {item}", file=sys.stderr)
            bad += 1
            continue
        _, result = item
        text, code = expected(i)
        if result["stdout"] != text or result["exit_code"] != code:
            print(f"request {i}: expected {text!r} and exit {code}, got "
                  f"{result['stdout']!r} and exit {result['exit_code']} "
                  f"(error {result['error']!r})", file=sys.stderr)
            bad += 1
    await client.close()
    if proc:
        await proc.wait()
    print(f"{args.count} requests, {args.count - bad} responses matched")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
