// bench/competitor.js -- the Node.js competitor of bench/sbxbench (issue 6).
//
//     /usr/bin/node competitor.js CONCURRENCY COUNT -- PROGRAM [ARG...]
//
// Runs COUNT copies of the command, CONCURRENCY at a time, the way a Node
// program would: child_process.spawn() in a new session (detached), stdin
// ignored, stdout and stderr on pipes read to the end; a run is over at its
// 'close' event (the process has exited and its pipes are closed).  Standard
// library only.
//
// Prints, for bench/sbxbench to parse: a line "SECONDS FAILED N", then the N
// latencies in seconds, one per line: from when the run was asked for (the
// start, for the first CONCURRENCY runs) until its 'close' event.
'use strict';
const { spawn } = require('child_process');

const args = process.argv.slice(2);
if (args.length < 4 || args[2] !== '--') {
  process.stderr.write('usage: competitor.js CONCURRENCY COUNT -- PROGRAM [ARG...]\n');
  process.exit(2);
}
const concurrency = parseInt(args[0], 10);
const count = parseInt(args[1], 10);
const argv = args.slice(3);
const env = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' };
const latencies = [];
let started = 0;
let done = 0;
let failed = 0;
const t0 = process.hrtime.bigint();

function seconds(since) {
  return Number(process.hrtime.bigint() - since) / 1e9;
}

function finish() {
  const out = [`${seconds(t0).toFixed(6)} ${failed} ${latencies.length}`];
  for (const x of latencies) out.push(x.toFixed(6));
  process.stdout.write(out.join('\n') + '\n');
}

function startOne() {
  if (started >= count) return;
  // The first CONCURRENCY runs were all asked for at the start.
  const begun = started < concurrency ? t0 : process.hrtime.bigint();
  started++;
  const child = spawn(argv[0], argv.slice(1), {
    stdio: ['ignore', 'pipe', 'pipe'], env, detached: true,
  });
  const chunks = [[], []];
  child.stdout.on('data', (d) => chunks[0].push(d));
  child.stderr.on('data', (d) => chunks[1].push(d));
  child.on('error', () => {});
  child.on('close', (code) => {
    if (code === 0) latencies.push(seconds(begun));
    else failed++;
    if (++done === count) finish();
    else startOne();
  });
}

for (let i = 0; i < concurrency && i < count; i++) startOne();
