// A small correct idempotency-key service on Node's own http module, keys in memory, with no
// clock hook: a key is kept for RETENTION_MS of Date.now(), and a sweeper on a setInterval timer
// deletes the expired ones.  Only a clock moved from outside (libfaketime) lets the harness see
// keys expire, and the sweeper only runs after a jump if the event loop's timers (monotonic)
// survived it.
//
// node memory-charges.js PORT [RETENTION_SECONDS].  POST /charges (strict, 422 on reuse, 409 while in flight,
// replays marked Idempotent-Replayed: true; X-Test-Delay-Ms holds the answer back on a timer),
// GET /keys (rows within retention, entries held), GET /health.  Each charge is reported to
// $IDEM_RECORDER_URL/effects.
'use strict';

const crypto = require('node:crypto');
const http = require('node:http');

// A retention shorter than the target file promises is this service's flaw.
const RETENTION_MS = Number(process.argv[3] || 86400) * 1000;
const SWEEP_EVERY_MS = 50;
const keys = new Map(); // "tenant key" -> { fingerprint, expires, status?, body? }

setInterval(() => {
  const now = Date.now();
  for (const [name, record] of keys) {
    if (record.expires <= now) keys.delete(name);
  }
}, SWEEP_EVERY_MS);

function answer(res, status, body, headers = {}) {
  const payload = JSON.stringify(body);
  // Node adds the Date header from Date.now(): the clock libfaketime moves.
  res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
  res.end(payload);
}

function canonical(value) {
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.keys(value).sort().map((k) => [k, canonical(value[k])]));
  }
  return value;
}

async function charge(req, res, raw) {
  const tenant = (req.headers.authorization || '').replace(/^Bearer /, '').trim();
  const key = req.headers['idempotency-key'];
  if (!tenant) return answer(res, 401, { error: 'no tenant' });
  if (!key) return answer(res, 400, { error: 'Idempotency-Key is required' });
  let body;
  try {
    body = JSON.parse(raw);
  } catch {
    return answer(res, 400, { error: 'a JSON body' });
  }
  if (!Number.isSafeInteger(body?.amount) || body.amount <= 0) {
    return answer(res, 400, { error: 'a positive amount' });
  }
  const fingerprint = crypto.createHash('sha256').update(JSON.stringify(canonical(body)))
    .digest('hex');
  const name = `${tenant} ${key}`;
  const held = keys.get(name);
  if (held && held.expires > Date.now()) {
    if (held.fingerprint !== fingerprint) {
      return answer(res, 422, { error: 'the key was used with another request' });
    }
    if (held.status === undefined) {
      return answer(res, 409, { error: 'a request with this key is in progress' },
        { 'Retry-After': '1' });
    }
    return answer(res, held.status, held.body, { 'Idempotent-Replayed': 'true' });
  }
  const record = { fingerprint, expires: Date.now() + RETENTION_MS };
  keys.set(name, record);
  const delay = Number.parseInt(req.headers['x-test-delay-ms'] || '0', 10);
  if (delay > 0) await new Promise((resolve) => setTimeout(resolve, Math.min(delay, 10000)));
  const created = { id: `ch_${crypto.randomBytes(8).toString('hex')}`, ...body };
  try {
    const reported = await fetch(`${process.env.IDEM_RECORDER_URL}/effects`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ tenant, key, id: created.id }),
    });
    if (!reported.ok) throw new Error(`the recorder answered ${reported.status}`);
  } catch (error) {
    keys.delete(name); // nothing was charged: release the key
    return answer(res, 500, { error: String(error) });
  }
  Object.assign(record, { status: 201, body: created });
  return answer(res, 201, created);
}

// rows: the keys still within their retention, as a store that expires on read holds them;
// held: the entries in memory, which only the sweeper's timer removes.
function sizes() {
  const now = Date.now();
  let rows = 0;
  for (const record of keys.values()) if (record.expires > now) rows += 1;
  return { rows, held: keys.size };
}

http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    if (req.method === 'GET' && req.url === '/health') return answer(res, 200, { ok: true });
    if (req.method === 'GET' && req.url === '/keys') return answer(res, 200, sizes());
    if (req.method === 'POST' && req.url === '/charges') {
      return charge(req, res, Buffer.concat(chunks).toString());
    }
    return answer(res, 404, { error: 'not found' });
  });
}).listen(Number(process.argv[2]), '127.0.0.1');
