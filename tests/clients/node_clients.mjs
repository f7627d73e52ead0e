// node-redis 6 (RESP3 by default, and RESP2) and ioredis 6 (RESP3 by default, and RESP2)
// against a running server.
//
// Usage: RILL_PORT=PORT RILL_NODE_MODULES=.deps/node/node_modules node --test tests/clients/node_clients.mjs
// The node test runner prints its own summary (# tests / # pass / # fail).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';

const PORT = Number(process.env.RILL_PORT);
assert.ok(PORT > 0, 'set RILL_PORT to the port of a running server');
const modules = resolve(process.env.RILL_NODE_MODULES ?? '.deps/node/node_modules');
const require = createRequire(`${modules}/`);
const { createClient } = require('redis');
const Redis = require('ioredis');
const nodeRedisVersion = require('redis/package.json').version;
const ioredisVersion = require('ioredis/package.json').version;
const PREFIX = `nodetest:${process.pid}:`;
const TIMEOUT = { timeout: 15000 };

function field(info, name) {
  const line = info.split('\r\n').find((l) => l.startsWith(`${name}:`));
  return line?.slice(name.length + 1);
}

for (const RESP of [3, 2]) {
  describe(`node-redis ${nodeRedisVersion} RESP${RESP}`, TIMEOUT, () => {
    let client;
    const k = (name) => `${PREFIX}nr${RESP}:${name}`;
    before(async () => {
      const options = {
        url: `redis://127.0.0.1:${PORT}`,
        socket: { reconnectStrategy: false, connectTimeout: 5000 },
      };
      if (RESP === 2) options.RESP = 2;
      client = createClient(options);
      client.on('error', () => {}); // errors surface through the awaited commands
      await client.connect();
    });
    after(async () => {
      await client?.close?.();
    });

    it('negotiated the protocol', async () => {
      const info = String(await client.sendCommand(['CLIENT', 'INFO']));
      assert.match(info, new RegExp(`\\bresp=${RESP}\\b`));
    });
    it('PING', async () => {
      assert.equal(await client.ping(), 'PONG');
    });
    it('SET/GET', async () => {
      assert.equal(await client.set(k('s'), 'value'), 'OK');
      assert.equal(await client.get(k('s')), 'value');
      assert.equal(await client.get(k('missing')), null);
      assert.equal(await client.incrBy(k('n'), 5), 5);
      assert.deepEqual(await client.mGet([k('s'), k('missing')]), ['value', null]);
      assert.equal(await client.del([k('s'), k('n')]), 2);
    });
    it('errors reject', async () => {
      await client.rPush(k('l'), 'a');
      await assert.rejects(client.get(k('l')), /WRONGTYPE/);
      await assert.rejects(client.sendCommand(['NOSUCHCOMMAND']), /unknown command/);
      await client.del(k('l'));
    });
    it('MULTI/EXEC', async () => {
      const replies = await client.multi().set(k('t'), '1').incr(k('t')).get(k('t')).del(k('t')).exec();
      assert.deepEqual(replies, ['OK', 2, '2', 1]);
    });
    it('hash', async () => {
      await client.hSet(k('h'), { a: '1', b: '2' });
      assert.deepEqual({ ...(await client.hGetAll(k('h'))) }, { a: '1', b: '2' });
      await client.del(k('h'));
    });
    it('INFO parses', async () => {
      const info = await client.info();
      assert.ok(field(info, 'redis_version'), 'redis_version missing');
      assert.equal(field(await client.info('server'), 'tcp_port'), String(PORT));
    });
    it('crash-and-rescue stream flow', async () => {
      // A consumer reads 50 entries and dies; 150 ms later another reclaims them all with
      // XAUTOCLAIM; poison entries are dead-lettered and acked in one MULTI.
      const stream = k('{orders}');
      const dlq = k('{orders}:dlq');
      await client.del([stream, dlq]);
      assert.equal(await client.xGroupCreate(stream, 'workers', '0', { MKSTREAM: true }), 'OK');
      const ids = [];
      for (let i = 0; i < 50; i++) {
        ids.push(await client.xAdd(stream, '*', { n: String(i), poison: i % 10 === 3 ? '1' : '0' }));
      }
      const read = await client.sendCommand(['XREADGROUP', 'GROUP', 'workers', 'crashy', 'COUNT', '50', 'STREAMS', stream, '>']);
      const entries = read instanceof Map ? [...read.values()][0]
        : Array.isArray(read) && Array.isArray(read[0]) ? read[0][1] : Object.values(read)[0];
      assert.deepEqual(entries.map((e) => String(e[0])), ids);
      const summary = await client.xPending(stream, 'workers');
      assert.equal(Number(summary.pending), 50);
      await new Promise((r) => setTimeout(r, 150));
      const claimed = await client.sendCommand(['XAUTOCLAIM', stream, 'workers', 'rescuer', '100', '0-0', 'COUNT', '50']);
      const claimedEntries = claimed[1];
      assert.deepEqual(claimedEntries.map((e) => String(e[0])), ids);
      assert.deepEqual(claimed[2], []);
      const detail = await client.xPendingRange(stream, 'workers', '-', '+', 50);
      assert.ok(detail.every((p) => Number(p.deliveriesCounter) === 2 && p.consumer === 'rescuer'), JSON.stringify(detail[0]));
      for (const [id, flat] of claimedEntries) {
        const fields = {};
        for (let i = 0; i < flat.length; i += 2) fields[String(flat[i])] = String(flat[i + 1]);
        const tx = client.multi();
        if (fields.poison === '1') tx.xAdd(dlq, '*', { ...fields, deadLetteredFrom: `${stream}/${id}` });
        tx.xAck(stream, 'workers', String(id));
        await tx.exec();
      }
      assert.equal(Number((await client.xPending(stream, 'workers')).pending), 0);
      const dead = await client.xRange(dlq, '-', '+');
      assert.deepEqual(dead.map((e) => e.message.n), ['3', '13', '23', '33', '43']);
      assert.ok(dead.every((e) => e.message.deadLetteredFrom.startsWith(`${stream}/`)));
      await client.del([stream, dlq]);
    });
    it('HELLO', async () => {
      const reply = await client.sendCommand(['HELLO', String(RESP)]);
      const map = reply instanceof Map ? Object.fromEntries(reply)
        : Array.isArray(reply) ? Object.fromEntries(Array.from({ length: reply.length / 2 }, (_, i) => [reply[2 * i], reply[2 * i + 1]]))
        : reply;
      assert.equal(String(map.server), 'redis');
      assert.equal(Number(map.proto), RESP);
    });
  });

  describe(`ioredis ${ioredisVersion} RESP${RESP}`, TIMEOUT, () => {
    let redis;
    const k = (name) => `${PREFIX}io${RESP}:${name}`;
    before(async () => {
      redis = new Redis({
        host: '127.0.0.1', port: PORT, protocol: RESP, lazyConnect: true,
        retryStrategy: () => null, maxRetriesPerRequest: 0, connectTimeout: 5000,
      });
      redis.on('error', () => {});
      await redis.connect();
    });
    after(async () => {
      redis?.disconnect();
    });

    it('negotiated the protocol', async () => {
      const info = String(await redis.call('CLIENT', 'INFO'));
      assert.match(info, new RegExp(`\\bresp=${RESP}\\b`));
    });
    it('PING', async () => {
      assert.equal(await redis.ping(), 'PONG');
    });
    it('SET/GET', async () => {
      assert.equal(await redis.set(k('s'), 'value', 'EX', 100), 'OK');
      assert.equal(await redis.get(k('s')), 'value');
      assert.equal(await redis.get(k('missing')), null);
      // A TTL only goes down from 100, and it reads 99 once half a second has passed since the
      // SET: a loaded machine may take that long between the two commands.
      const ttl = await redis.ttl(k('s'));
      assert.ok(ttl > 90 && ttl <= 100, `TTL ${ttl} right after SET EX 100`);
      assert.equal(await redis.del(k('s')), 1);
    });
    it('errors reject', async () => {
      await redis.rpush(k('l'), 'a');
      await assert.rejects(redis.get(k('l')), /WRONGTYPE/);
      await redis.del(k('l'));
    });
    it('MULTI/EXEC', async () => {
      const replies = await redis.multi().set(k('t'), '1').incr(k('t')).get(k('t')).del(k('t')).exec();
      assert.deepEqual(replies, [[null, 'OK'], [null, 2], [null, '2'], [null, 1]]);
    });
    it('pipeline', async () => {
      const p = redis.pipeline();
      for (let i = 0; i < 50; i++) p.rpush(k('pl'), String(i));
      const replies = await p.exec();
      assert.deepEqual(replies.map(([, v]) => v), Array.from({ length: 50 }, (_, i) => i + 1));
      await redis.del(k('pl'));
    });
    it('INFO parses', async () => {
      const info = await redis.info();
      assert.ok(field(info, 'redis_version'));
      assert.equal(field(info, 'loading') ?? '0', '0');
    });
    it('HELLO', async () => {
      const reply = await redis.call('HELLO', String(RESP));
      const flat = Array.isArray(reply) ? reply : Object.entries(reply).flat();
      const map = Object.fromEntries(Array.from({ length: flat.length / 2 }, (_, i) => [String(flat[2 * i]), flat[2 * i + 1]]));
      assert.equal(String(map.server), 'redis');
      assert.equal(Number(map.proto), RESP);
    });
  });
}
