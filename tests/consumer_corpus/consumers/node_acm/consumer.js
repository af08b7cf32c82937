// A charge worker on amqp-connection-manager (amqplib) with dedup in Redis.
//
// Choices: the dedup key is the Idempotency-Key header; the key is claimed with
// SET dedup:KEY claim:TOKEN NX EX 30 (a 30 s lease), and the charge and the key's "done" mark
// (kept 24 h) are written by one Lua script that checks the claim is still ours; a delivery that
// finds a live claim holds the message and looks again until the key is done or the claim ran out;
// eight jobs at once (prefetch 8); a failed job releases its claim and is requeued for ever; a
// poison message is rejected into the dead-letter queue; an events feed and GET /effects?key=K on
// --port.  Test hooks, first delivery only (":every" for every delivery): X-Test-Pause:
// before-work:MS, X-Test-Fault: before-work|after-work.
//
// Flaws: message-id-only deduplicates on the message id (a republish runs again); body-bytes
// deduplicates on a hash of the body's bytes (a re-serialised copy runs again, another job with
// the same bytes is taken for a copy).  --flaw repeats, but these two cannot be combined: each
// is what the key is made of.
//
// Run: node consumer.js --amqp-url URL --queue Q --dlq DLQ --redis URL --port PORT [--flaw F]...
'use strict';

const crypto = require('node:crypto');
const http = require('node:http');
const amqp = require('amqp-connection-manager');
const { createClient } = require('redis');

const FLAWS = ['message-id-only', 'body-bytes'];
const LEASE = 30;
const WINDOW = 24 * 3600;
const COMMIT = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('RPUSH', KEYS[2], ARGV[2])
redis.call('SET', KEYS[1], 'done', 'EX', ARGV[3])
return 1`;
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

function options(argv) {
  const wanted = ['amqp-url', 'queue', 'dlq', 'redis', 'port'];
  const found = { flaws: [] };
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i].replace(/^--/, '');
    if (name === 'flaw') found.flaws.push(argv[i + 1]);
    else found[name] = argv[i + 1];
  }
  for (const name of wanted) {
    if (!found[name]) throw new Error(`--${name} is required`);
  }
  for (const flaw of found.flaws) {
    if (!FLAWS.includes(flaw)) throw new Error(`--flaw: one of ${FLAWS}`);
  }
  if (FLAWS.every((flaw) => found.flaws.includes(flaw))) {
    console.error('consumer.js: error: flaws message-id-only and body-bytes cannot be combined: '
                  + 'both choose what a message is deduplicated on, each its own way; choose one');
    process.exit(2);
  }
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
  const headers = message.properties.headers || {};
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() === name.toLowerCase()) return String(v);
  }
  return '';
}

function hook(message, name, first) {
  const value = header(message, name);
  if (value.endsWith(':every')) return value.slice(0, -':every'.length);
  return first ? value : '';
}

function dedupKey(message, key) {
  if (args.flaws.includes('message-id-only')) return message.properties.messageId || key;
  if (args.flaws.includes('body-bytes')) {
    return crypto.createHash('sha256').update(message.content).digest('hex');
  }
  return key;
}

async function main() {
  const store = createClient({ url: args.redis });
  store.on('error', () => {}); // reconnects by itself; a failed command fails its job
  await store.connect();

  async function claim(dedup, token) {
    for (;;) {
      if (await store.set(`dedup:${dedup}`, token, { NX: true, EX: LEASE })) return true;
      if ((await store.get(`dedup:${dedup}`)) === 'done') return false;
      await sleep(200);
    }
  }

  async function handle(channel, message) {
    const key = header(message, 'Idempotency-Key');
    const deliveries = Number(header(message, 'x-delivery-count') || 0);
    const first = !message.fields.redelivered && deliveries === 0;
    record('deliver', key, { redelivered: message.fields.redelivered,
                             message_id: message.properties.messageId });
    const settle = (how, fields = {}) => {
      try {
        if (how === 'ack') channel.ack(message);
        else if (how === 'nack') channel.nack(message, false, true);
        else channel.nack(message, false, false);
        record(how === 'reject' ? 'dead-letter' : how, key, fields);
      } catch (error) {
        record('ack-lost', key, { reason: String(error) });
      }
    };
    let job;
    try {
      job = JSON.parse(message.content.toString());
    } catch (error) {
      job = null;
    }
    if (!key || !job || !Number.isInteger(job.amount) || job.amount < 1) {
      record('poison', key, { reason: 'not a charge' });
      settle('reject');
      return;
    }
    const dedup = dedupKey(message, key);
    const token = `claim:${crypto.randomBytes(8).toString('hex')}`;
    try {
      if (!(await claim(dedup, token))) {
        settle('ack', { outcome: 'duplicate' });
        return;
      }
      record('claim', key);
      const pause = hook(message, 'X-Test-Pause', first);
      const fault = hook(message, 'X-Test-Fault', first);
      if (pause.startsWith('before-work:')) {
        const ms = Number(pause.split(':')[1]);
        record('pause', key, { point: 'before-work', seconds: ms / 1000 });
        await sleep(ms);
      }
      if (fault === 'before-work') throw new Error('X-Test-Fault: before-work');
      const charge = JSON.stringify({ id: `ch_${crypto.randomBytes(8).toString('hex')}`,
                                      amount: job.amount });
      const committed = await store.eval(COMMIT, {
        keys: [`dedup:${dedup}`, `ledger:${key}`], arguments: [token, charge, String(WINDOW)] });
      if (!committed) {
        settle('nack', { reason: 'the claim ran out before the commit' });
        return;
      }
      record('commit', key);
      if (fault === 'after-work') throw new Error('X-Test-Fault: after-work');
    } catch (error) {
      record('work-failed', key, { reason: String(error) });
      await store.eval(RELEASE, { keys: [`dedup:${dedup}`], arguments: [token] }).catch(() => {});
      await sleep(200);
      settle('nack', { reason: String(error) });
      return;
    }
    settle('ack', { outcome: 'done' });
  }

  const connection = amqp.connect([args['amqp-url']], {
    heartbeatIntervalInSeconds: 2, reconnectTimeInSeconds: 0.5 });
  connection.on('disconnect', () => record('disconnected', null));
  let serving = false;
  const wrapper = connection.createChannel({
    json: false,
    setup: async (channel) => {
      await channel.assertQueue(args.dlq, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
      await channel.assertQueue(args.queue, { durable: true, arguments: {
        'x-queue-type': 'quorum', 'x-dead-letter-exchange': '',
        'x-dead-letter-routing-key': args.dlq } });
      await channel.prefetch(8);
      await channel.consume(args.queue, (message) => {
        if (message) handle(channel, message);
      }, { noAck: false });
      if (!serving) {
        serving = true;
        serve(store);
      }
    },
  });

  const stop = async () => {
    await wrapper.close().catch(() => {});
    await connection.close().catch(() => {});
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

function serve(store) {
  // The port opens once the worker consumes: the harness publishes as soon as it answers.
  http.createServer(async (request, response) => {
    const url = new URL(request.url, 'http://localhost');
    let data = { ok: true };
    if (url.pathname === '/events') {
      const after = Number(url.searchParams.get('after') || 0);
      const items = events.slice(after);
      data = { events: items, next: after + items.length };
    } else if (url.pathname === '/effects') {
      data = { count: await store.lLen(`ledger:${url.searchParams.get('key')}`) };
    } else if (url.pathname === '/time') {
      const [seconds, micros] = await store.time().then((t) =>
        Array.isArray(t) ? t.map(Number) : [t.getTime() / 1000, 0]);
      data = seconds + micros / 1e6;
    }
    response.writeHead(200, { 'Content-Type': 'application/json' });
    response.end(JSON.stringify(data));
  }).listen(Number(args.port), '127.0.0.1');
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
