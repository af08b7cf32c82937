// A charge worker on kafkajs with its dedup in Redis.
//
// Choices: the dedup key is the Idempotency-Key header; the key is claimed with
// SET dedup:KEY claim:TOKEN NX EX 30 (a 30 s lease), and the charge and the key's "done" mark
// (kept 24 h) are written by one Lua script that checks the claim is still ours; a record whose key
// another member holds waits until the key is done or the claim ran out; eachMessage, one record
// at a time, autoCommit off: the offset is committed with commitOffsets after the script; a failed
// job releases its claim and is read again (seek back), and goes to the dead-letter topic at its
// third delivery in this process; a poison record (no key, not a charge) goes to the dead-letter
// topic at once; an events feed and GET /effects?key=K on --port.  Test hooks (record headers):
// X-Test-Pause: before-work:MS or before-commit:MS, X-Test-Fault: before-work|after-work.
//
// Flaws: commit-before-work commits the record's offset at the top of eachMessage, before the job
// ("so a slow job is not read twice"); dedup-in-memory remembers finished keys in a Set of the
// process instead of Redis.
//
// Run: node consumer.js --bootstrap HOST:PORT --topic T --group G --dlt T.dead --redis URL
//      --port PORT [--session-timeout-ms N] [--max-poll-interval-ms N] [--flaw F]
'use strict';

const crypto = require('node:crypto');
const http = require('node:http');
const { Kafka, logLevel } = require('kafkajs');
const { createClient } = require('redis');

const FLAWS = ['commit-before-work', 'dedup-in-memory'];
const LEASE = 30;
const WINDOW = 24 * 3600;
const MAX_DELIVERIES = 3;
const COMMIT = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('RPUSH', KEYS[2], ARGV[2])
redis.call('SET', KEYS[1], 'done', 'EX', ARGV[3])
return 1`;
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

function options(argv) {
  const found = { 'session-timeout-ms': '10000', 'max-poll-interval-ms': '300000' };
  for (let i = 0; i < argv.length; i += 2) found[argv[i].replace(/^--/, '')] = argv[i + 1];
  for (const name of ['bootstrap', 'topic', 'group', 'dlt', 'redis', 'port']) {
    if (!found[name]) throw new Error(`--${name} is required`);
  }
  if (found.flaw && !FLAWS.includes(found.flaw)) throw new Error(`--flaw: one of ${FLAWS}`);
  return found;
}

const args = options(process.argv.slice(2));
const events = [];
function record(type, key, fields = {}) {
  events.push({ index: events.length, type, key, pid: process.pid, time: Date.now() / 1000,
                ...fields });
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function header(message, name) {
  for (const [k, v] of Object.entries(message.headers || {})) {
    if (k.toLowerCase() === name.toLowerCase()) return String(v);
  }
  return '';
}

async function main() {
  const store = createClient({ url: args.redis });
  store.on('error', () => {}); // reconnects by itself; a failed command fails its job
  await store.connect();
  const remembered = new Set(); // the dedup-in-memory flaw's whole dedup table
  const deliveries = new Map();

  const kafka = new Kafka({ clientId: `kafkajs-redis-${process.pid}`, brokers: [args.bootstrap],
                            logLevel: logLevel.NOTHING,
                            retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: 1000 } });
  const sessionTimeout = Number(args['session-timeout-ms']);
  const consumer = kafka.consumer({
    groupId: args.group, sessionTimeout, heartbeatInterval: Math.max(100, sessionTimeout / 3),
    rebalanceTimeout: Number(args['max-poll-interval-ms']), maxWaitTimeInMs: 100 });
  const producer = kafka.producer();

  const commit = async (topic, partition, message, key, outcome) => {
    try {
      await consumer.commitOffsets([{ topic, partition,
                                      offset: (BigInt(message.offset) + 1n).toString() }]);
    } catch (error) {
      record('ack-lost', key, { reason: String(error) });
      return;
    }
    record('offset-commit', key, { outcome, offset: Number(message.offset) });
  };

  const deadLetter = async (topic, partition, message, key, reason) => {
    await producer.send({ topic: args.dlt, acks: -1, messages: [{
      key: message.key, value: message.value,
      headers: { ...message.headers, 'x-dead-letter-reason': reason } }] });
    record('dead-letter', key, { topic: args.dlt, reason });
    if (args.flaw !== 'commit-before-work') await commit(topic, partition, message, key, 'dead-lettered');
  };

  // kafkajs heartbeats between messages only: a long job calls heartbeat() as it goes, or the
  // group drops the member after sessionTimeout.
  const hook = async (key, pause, point, heartbeat) => {
    if (pause.startsWith(`${point}:`)) {
      const ms = Number(pause.split(':')[1]);
      record('pause', key, { point, seconds: ms / 1000 });
      for (let left = ms; left > 0; left -= 250) {
        await sleep(Math.min(250, left));
        await heartbeat().catch(() => {});
      }
    }
  };

  const work = async (key, amount, pause, fault, heartbeat) => {
    const charge = JSON.stringify({ id: `ch_${crypto.randomBytes(8).toString('hex')}`, amount });
    if (args.flaw === 'dedup-in-memory') {
      if (remembered.has(key)) return 'duplicate';
      record('claim', key);
      await hook(key, pause, 'before-work', heartbeat);
      if (fault === 'before-work') throw new Error('X-Test-Fault: before-work');
      await store.rPush(`ledger:${key}`, charge);
      remembered.add(key);
      record('commit', key);
      if (fault === 'after-work') throw new Error('X-Test-Fault: after-work');
      return 'done';
    }
    const token = `claim:${crypto.randomBytes(8).toString('hex')}`;
    for (;;) {
      if (await store.set(`dedup:${key}`, token, { NX: true, EX: LEASE })) break;
      if ((await store.get(`dedup:${key}`)) === 'done') return 'duplicate';
      await sleep(200);
    }
    record('claim', key);
    let committed;
    try {
      await hook(key, pause, 'before-work', heartbeat);
      if (fault === 'before-work') throw new Error('X-Test-Fault: before-work');
      committed = await store.eval(COMMIT, {
        keys: [`dedup:${key}`, `ledger:${key}`], arguments: [token, charge, String(WINDOW)] });
    } catch (error) {
      await store.eval(RELEASE, { keys: [`dedup:${key}`], arguments: [token] }).catch(() => {});
      throw error;
    }
    if (!committed) throw new Error('the claim ran out before the commit');
    record('commit', key);
    if (fault === 'after-work') throw new Error('X-Test-Fault: after-work');
    return 'done';
  };

  const eachMessage = async ({ topic, partition, message, heartbeat }) => {
    const key = header(message, 'Idempotency-Key') || null;
    const place = `${partition}/${message.offset}`;
    const earlier = deliveries.get(place) || 0;
    deliveries.set(place, earlier + 1);
    record('deliver', key, { partition, offset: Number(message.offset), redelivered: earlier > 0 });
    if (args.flaw === 'commit-before-work') await commit(topic, partition, message, key, 'received');
    let job = null;
    try {
      job = JSON.parse(message.value.toString());
    } catch (error) {
      job = null;
    }
    if (!key || !job || !Number.isInteger(job.amount) || job.amount < 1) {
      record('poison', key, { reason: 'not a charge' });
      await deadLetter(topic, partition, message, key, 'not a charge');
      return;
    }
    const first = earlier === 0;
    const pause = first ? header(message, 'X-Test-Pause') : '';
    const fault = first ? header(message, 'X-Test-Fault') : '';
    let outcome;
    try {
      outcome = await work(key, job.amount, pause, fault, heartbeat);
    } catch (error) {
      record('work-failed', key, { reason: String(error), attempt: earlier + 1 });
      if (earlier + 1 >= MAX_DELIVERIES) {
        await deadLetter(topic, partition, message, key, `${error} (delivery ${earlier + 1})`);
      } else {
        await sleep(100);
        consumer.seek({ topic, partition, offset: message.offset });
        record('nack', key, { reason: String(error) });
      }
      return;
    }
    await hook(key, pause, 'before-commit', heartbeat);
    if (args.flaw !== 'commit-before-work') await commit(topic, partition, message, key, outcome);
  };

  let serving = false;
  consumer.on(consumer.events.GROUP_JOIN, (event) => {
    const assigned = event.payload.memberAssignment[args.topic] || [];
    record('assigned', null, { partitions: assigned });
    if (!serving) {
      serving = true;
      serve(store);
    }
  });
  consumer.on(consumer.events.CRASH, (event) => record('crashed', null, {
    reason: String(event.payload.error) }));

  await producer.connect();
  await consumer.connect();
  await consumer.subscribe({ topic: args.topic, fromBeginning: true });
  await consumer.run({ autoCommit: false, partitionsConsumedConcurrently: 1, eachMessage });

  const stop = async () => {
    await consumer.disconnect().catch(() => {});
    await producer.disconnect().catch(() => {});
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

function serve(store) {
  // The port opens once the group gave this member its partitions.
  http.createServer(async (request, response) => {
    const url = new URL(request.url, 'http://localhost');
    let data = { ok: true };
    if (url.pathname === '/events') {
      const after = Number(url.searchParams.get('after') || 0);
      const items = events.slice(after);
      data = { events: items, next: after + items.length };
    } else if (url.pathname === '/effects') {
      data = { count: await store.lLen(`ledger:${url.searchParams.get('key')}`) };
    }
    response.writeHead(200, { 'Content-Type': 'application/json' });
    response.end(JSON.stringify(data));
  }).listen(Number(args.port), '127.0.0.1');
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
