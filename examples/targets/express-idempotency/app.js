// A minimal charge service on Express, made idempotent by express-idempotency and its Redis
// adapter, wired as the READMEs show: the adapter connects (over a node-redis client we give it), the middleware is
// mounted with `app.use`, and the route handler returns early when `isHit(req)` says the
// middleware already answered.  Nothing in either library is patched or wrapped.
//
// The charge is the side effect idem-harness counts: the handler reports it to the harness's
// recorder ($IDEM_RECORDER_URL/effects), outside the idempotency layer under test.
//
// Environment: PORT (loopback port to listen on), REDIS_URL, IDEM_RECORDER_URL.
'use strict';

const crypto = require('node:crypto');
const { createClient } = require('@redis/client');
const express = require('express');
const idempotency = require('express-idempotency');
const RedisAdapter = require('express-idempotency-redis-adapter').default;

const HOST = '127.0.0.1';
const RETENTION_SECONDS = 86400; // the adapter's documented default TTL, stated explicitly
const MAX_DELAY_MS = 60000;

// The adapter's README allows handing it a node-redis client (`connectionInstance`); we do, because
// node-redis's README says an application MUST listen to its client's 'error' events: without a
// listener a dropped connection to Redis is thrown and ends the process.  The client reconnects on
// its own; commands issued while it is down fail, and the middleware passes the error on.
const redis = createClient({ url: process.env.REDIS_URL });
redis.on('error', (error) => console.error(`redis: ${error.message}`));

const adapter = new RedisAdapter({
  connectionInstance: redis,
  ttl: RETENTION_SECONDS,
});

const app = express();
app.use(express.json());
app.use(idempotency.idempotency({ dataAdapter: adapter }));

app.get('/health', (req, res) => {
  res.status(adapter.isReady ? 200 : 503).json({ redis: adapter.isReady });
});

// The harness's store-size hook: the keys Redis still holds (KEYS skips those past their TTL).
app.get('/test/keys', async (req, res) => {
  res.json({ rows: (await redis.keys('*')).length });
});

app.post('/charges', async (req, res) => {
  const service = idempotency.getSharedIdempotencyService();
  if (service.isHit(req)) {
    return; // the middleware has answered from its store (README: "Check if there was a hit!")
  }
  const tenant = tenantOf(req);
  if (tenant === null) {
    return res.status(401).json({ error: 'invalid_authorization' });
  }
  const problem = invalidCharge(req.body);
  if (problem !== null) {
    return res.status(400).json({ error: 'invalid_charge', detail: problem });
  }
  if (req.get('X-Test-Fault') === 'handler-error') {
    // The provider failed before charging. README: "Report error in processing request".
    await service.reportError(req);
    return res.status(500).json({ error: 'handler_error' });
  }
  const delayMs = Number.parseInt(req.get('X-Test-Delay-Ms') || '0', 10);
  if (delayMs > 0) {
    // A slow payment provider, so a retry can arrive while this charge is still running.
    await new Promise((resolve) => setTimeout(resolve, Math.min(delayMs, MAX_DELAY_MS)));
  }
  const charge = {
    id: `ch_${crypto.randomBytes(12).toString('hex')}`,
    amount: req.body.amount,
    currency: req.body.currency,
    customer: req.body.customer ?? null,
  };
  try {
    await record(tenant, req.get('Idempotency-Key') ?? null, charge.id);
  } catch (error) {
    // README: "Report error in processing request", so the key is released for a retry.
    await service.reportError(req);
    return res.status(500).json({ error: 'charge_failed', detail: String(error) });
  }
  return res.status(201).location(`/charges/${charge.id}`).json(charge);
});

function tenantOf(req) {
  const match = /^Bearer (\S+)$/.exec(req.get('Authorization') || '');
  return match ? match[1] : null;
}

function invalidCharge(body) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    return 'the body must be a JSON object';
  }
  if (!Number.isSafeInteger(body.amount) || body.amount <= 0) {
    return 'amount must be a positive integer';
  }
  if (typeof body.currency !== 'string' || !/^[A-Za-z]{3}$/.test(body.currency)) {
    return 'currency must be three letters';
  }
  if (body.customer !== undefined && typeof body.customer !== 'string') {
    return 'customer must be a string';
  }
  return null;
}

async function record(tenant, key, id) {
  const response = await fetch(`${process.env.IDEM_RECORDER_URL}/effects`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ tenant, key, id }),
  });
  if (!response.ok) {
    throw new Error(`the recorder answered ${response.status}`);
  }
}

adapter
  .connect()
  .then(() => {
    app.listen(Number(process.env.PORT), HOST, () => {
      console.log(`express-idempotency example listening on http://${HOST}:${process.env.PORT}`);
    });
  })
  .catch((error) => {
    console.error(`cannot connect to Redis at ${process.env.REDIS_URL}: ${error}`);
    process.exit(1);
  });
