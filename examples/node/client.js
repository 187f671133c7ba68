#!/usr/bin/env node
// A small client of `sbx serve` (the msgpack wire protocol of DESIGN.md).
//
//   node client.js --socket PATH [--count N]
//   node client.js --sbx PATH-TO-SBX [--count N] [-- SERVE OPTIONS...]
//
// With --socket it connects to `sbx serve --listen unix:PATH`; with --sbx it
// starts `sbx serve --stdio` itself and talks over its stdin and stdout.  It
// sends N requests (default 100) at once over that one connection, then
// checks that every response carries the id of one request and the output
// and exit code that request asked for.  Exit status 0 when all match.
'use strict';

const net = require('node:net');
const { spawn } = require('node:child_process');
const { encode, decode } = require('@msgpack/msgpack');

class ServeError extends Error {
  constructor(code, message) {
    super(`${code}: ${message}`);
    this.code = code;
  }
}

// Requests go out as soon as they are made; responses come back in
// completion order and are matched to their request by id.
class Client {
  constructor(input, output) {
    this.output = output;
    this.nextId = 1;
    this.waiting = new Map();
    this.buffer = Buffer.alloc(0);
    input.on('data', (chunk) => this.receive(chunk));
    input.on('close', () => this.fail(new Error('sbx serve closed the connection')));
    input.on('error', (e) => this.fail(e));
  }

  receive(chunk) {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    while (this.buffer.length >= 4) {
      const length = this.buffer.readUInt32BE(0);
      if (this.buffer.length < 4 + length) break;
      const response = decode(this.buffer.subarray(4, 4 + length));
      this.buffer = this.buffer.subarray(4 + length);
      const pending = this.waiting.get(response.id);
      if (!pending) {
        this.fail(new Error(`a response with an unknown id: ${JSON.stringify(response)}`));
        return;
      }
      this.waiting.delete(response.id);
      if (response.error) pending.reject(new ServeError(response.error.code, response.error.message));
      else pending.resolve(response.result);
    }
  }

  fail(error) {
    for (const pending of this.waiting.values()) pending.reject(error);
    this.waiting.clear();
  }

  // Runs one command; resolves to the result map (DESIGN.md's JSON keys).
  run(fields) {
    const id = this.nextId++;
    const body = encode({ id, ...fields });
    const header = Buffer.alloc(4);
    header.writeUInt32BE(body.length, 0);
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.output.write(Buffer.concat([header, Buffer.from(body)]));
    });
  }
}

// What request i asks for: its own text on stdout, its own exit code.
function expected(i) {
  return { text: `request ${i}`, code: i % 7 };
}

function request(client, i) {
  const { text, code } = expected(i);
  if (i % 2) {
    // Half of them send their text on stdin and get it back from cat.
    return client.run({
      argv: ['/bin/sh', '-c', 'cat; exit $0', String(code)],
      stdin: new TextEncoder().encode(text),
      timeout: 30,
    });
  }
  return client.run({ shell: `printf '%s' '${text}'; exit ${code}`, timeout: 30 });
}

function parseArgs(argv) {
  const args = { count: 100, options: [] };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--') {
      args.options = argv.slice(i + 1);
      break;
    } else if (argv[i] === '--socket' || argv[i] === '--sbx' || argv[i] === '--count') {
      args[argv[i].slice(2)] = argv[++i];
    } else {
      throw new Error(`unknown argument '${argv[i]}'`);
    }
  }
  if (!args.socket === !args.sbx) throw new Error('give one of --socket PATH and --sbx PATH');
  args.count = Number(args.count);
  return args;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  let client;
  let child = null;
  let socket = null;
  if (args.socket) {
    socket = net.createConnection(args.socket);
    await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    client = new Client(socket, socket);
  } else {
    child = spawn(args.sbx, ['serve', '--stdio', ...args.options], { stdio: ['pipe', 'pipe', 'inherit'] });
    client = new Client(child.stdout, child.stdin);
  }

  const indexes = [...Array(args.count).keys()];
  const outcomes = await Promise.allSettled(indexes.map((i) => request(client, i)));
  let bad = 0;
  outcomes.forEach((outcome, i) => {
    const { text, code } = expected(i);
    if (outcome.status === 'rejected') {
      console.error(`request ${i}: ${outcome.reason.message}`);
      bad++;
    } else if (outcome.value.stdout !== text || outcome.value.exit_code !== code) {
      const r = outcome.value;
      console.error(`request ${i}: expected '${text}' and exit ${code}, got '${r.stdout}' ` +
        `and exit ${r.exit_code} (error ${r.error})`);
      bad++;
    }
  });
  if (socket) socket.end();
  if (child) {
    child.stdin.end();
    await new Promise((resolve) => child.once('exit', resolve));
  }
  console.log(`${args.count} requests, ${args.count - bad} responses matched`);
  return bad ? 1 : 0;
}

main().then((status) => { process.exitCode = status; }, (e) => {
  console.error(e.message);
  process.exitCode = 2;
});
