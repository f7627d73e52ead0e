// A rill stream worker in plain node-redis: read `>`, handle, XACK.
//
// The group's policy (RILL.GROUP SET, sent once at start) makes the server do the chores a
// hand-written Redis Streams consumer does on timers:
//
// - an entry a consumer has not acked within ACKWAIT (it crashed, hung, lost its connection) is
//   handed back by the server and served first to the next `XREADGROUP ... >` of any consumer;
// - an entry whose MAXDELIVER-th attempt fails is moved by the server, in one step, to the
//   dead-letter stream, with fields saying where it came from and why.
//
// So this loop has no XAUTOCLAIM sweep, counts no deliveries and never writes a dead letter.
//
// Usage:
//   node worker.mjs [--url redis://127.0.0.1:6379] [--stream orders] [--group workers]
//                   [--consumer NAME] [--count 10] [--block 2000]
//                   [--maxdeliver 5] [--ackwait 30000] [--backoff 1000,5000]
//                   [--deadletter KEY] [--crash-after N]
//
// Prints `handled <id> <n>` for each entry handled and acked, `retry <id> <why>` and
// `fatal <id> <why>` for each one handed back.
import { createRequire } from 'node:module';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';

// node-redis, from `npm install` in this directory, or from the node_modules directory that
// RILL_NODE_MODULES names (rill's tests use their own copy).
const modules = process.env.RILL_NODE_MODULES;
const require = createRequire(modules ? `${resolve(modules)}/` : import.meta.url);
const { createClient } = require('redis');

const { values: opt } = parseArgs({
  options: {
    url: { type: 'string', default: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
    stream: { type: 'string', default: 'orders' },
    group: { type: 'string', default: 'workers' },
    consumer: { type: 'string', default: `${hostname()}-${process.pid}` },
    count: { type: 'string', default: '10' }, // entries per read
    block: { type: 'string', default: '2000' }, // ms a read waits for entries
    // The group's policy. Only the options given are set; leave them all out to keep the
    // policy the group already has (set by another worker or with `rill policy set`).
    maxdeliver: { type: 'string' }, // attempts before an entry goes to the dead-letter stream
    ackwait: { type: 'string' }, // ms an entry may stay unacked before the server hands it back
    backoff: { type: 'string' }, // ms to wait before each retry, e.g. 1000,5000 (the last repeats)
    deadletter: { type: 'string' }, // the dead-letter stream (server default: {STREAM}:dlq)
    // For tests and demos: take N entries without handling or acking any, then die at once.
    'crash-after': { type: 'string', default: '0' },
  },
});

// A handler error no retry can fix (a malformed entry): dead-letter the entry now.
class PermanentError extends Error {}

// The application's work on one entry. Throwing hands the entry back for another attempt;
// throwing PermanentError dead-letters it at once. Handlers must be idempotent: a crash between
// the work and the XACK means the entry is delivered again. This one is a stand-in that tests
// can steer through the entry's fields.
async function handle(id, fields) {
  if (fields.fatal === '1') throw new PermanentError('entry marked fatal');
  if (fields.poison === '1') throw new Error('entry marked poison');
  console.log(`handled ${id} ${fields.n ?? '-'}`);
}

// Handle one entry, then ack it or hand it back: all a worker does with a server policy.
async function attempt(client, id, fields) {
  try {
    await handle(id, fields);
  } catch (err) {
    if (err instanceof PermanentError) {
      // XNACK FATAL: the server dead-letters the entry now (rill-reason fatal).
      await client.xNack(opt.stream, opt.group, 'FATAL', id);
      console.log(`fatal ${id} ${err.message}`);
    } else {
      // RILL.NACK: back to the group for another attempt (after the policy's BACKOFF delay, if
      // it has one). When this was attempt number MAXDELIVER the server moves the entry to the
      // dead-letter stream instead (rill-reason maxdeliver).
      await client.sendCommand(['RILL.NACK', opt.stream, opt.group, 'IDS', '1', id]);
      console.log(`retry ${id} ${err.message}`);
    }
    return;
  }
  await client.xAck(opt.stream, opt.group, id);
}

const client = createClient({ url: opt.url });
// Connection errors are reported here; node-redis reconnects by itself and runs the commands
// it queued meanwhile. What this consumer held is not lost: the server hands it back after
// ACKWAIT to whoever reads next.
client.on('error', (err) => console.error(`redis: ${err.message}`));
await client.connect();

// 1. The group, and the stream with it if needed. ID 0: the group also gets the entries added
//    before it existed. Another worker may have made it already (BUSYGROUP).
try {
  await client.xGroupCreate(opt.stream, opt.group, '0', { MKSTREAM: true });
} catch (err) {
  if (!String(err.message).startsWith('BUSYGROUP')) throw err;
}

// 2. The policy. RILL.GROUP SET changes only the options it names, so every worker may send
//    the same SET when it starts.
const policy = [];
for (const option of ['maxdeliver', 'ackwait', 'backoff', 'deadletter']) {
  if (opt[option] !== undefined) policy.push(option.toUpperCase(), opt[option]);
}
if (policy.length > 0) {
  await client.sendCommand(['RILL.GROUP', 'SET', opt.stream, opt.group, ...policy]);
}

// 3. The loop. SIGTERM/Ctrl-C stop it after the current read (at most --block ms) and the
//    entries it returned.
let stopping = false;
process.on('SIGTERM', () => (stopping = true));
process.on('SIGINT', () => (stopping = true));

const crashAfter = Number(opt['crash-after']);
let received = 0;
while (!stopping) {
  // [{ name, messages: [{ id, message: { field: value } }] }] with RESP2 and RESP3; or null.
  const reply = await client.xReadGroup(
    opt.group,
    opt.consumer,
    { key: opt.stream, id: '>' },
    { COUNT: Number(opt.count), BLOCK: Number(opt.block) },
  );
  for (const { id, message } of reply?.[0]?.messages ?? []) {
    received += 1;
    if (crashAfter > 0) {
      // Simulated crash: hold the entries, and once N arrived exit without cleanup, acking
      // nothing. The server hands them back after ACKWAIT.
      if (received >= crashAfter) {
        console.error(`crashing, holding ${received} entries`);
        process.exit(1);
      }
      continue;
    }
    await attempt(client, id, message);
  }
}
await client.close();
