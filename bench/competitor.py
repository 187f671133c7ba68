#!/usr/bin/python3
"""bench/competitor.py -- the Python competitor of bench/sbxbench (issue 6).

    /usr/bin/python3 competitor.py CONCURRENCY COUNT -- PROGRAM [ARG...]

Runs COUNT copies of the command, CONCURRENCY at a time, the way an asyncio
program would (and the way the reference Python sandbox does): each run is
asyncio.create_subprocess_exec() in a new session, with stdin from /dev/null
and stdout and stderr on pipes that communicate() reads to end-of-file.
Standard library only.

Prints, for bench/sbxbench to parse: a line "SECONDS FAILED N", then the N
latencies in seconds, one per line: from when the run was asked for (the
start, for the first CONCURRENCY runs; else just before its spawn) until its
pipes are closed and its exit status is in.
"""
import asyncio
import sys
import time


async def main(concurrency, count, argv):
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    todo = iter(range(count))
    latencies = []
    failed = 0

    async def worker():
        nonlocal failed
        first = True
        for _ in todo:
            # The first CONCURRENCY runs were all asked for at the start.
            t0 = start if first else time.monotonic()
            first = False
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=env, start_new_session=True)
            await proc.communicate()
            if proc.returncode == 0:
                latencies.append(time.monotonic() - t0)
            else:
                failed += 1

    start = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    seconds = time.monotonic() - start
    out = [f"{seconds:.6f} {failed} {len(latencies)}"]
    out += [f"{x:.6f}" for x in latencies]
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        sys.exit("usage: competitor.py CONCURRENCY COUNT -- PROGRAM [ARG...]")
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[4:]))
