// Unknown outcomes: listUnknownOutcomes and decideOutcome in memory (nothing waits; deciding is
// refused), and against a real `openbot serve` a write whose answer was lost when the server was
// killed: listed after the restart, decided through the SDK, never sent again.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import { describe, test } from 'node:test';

import { modes, scriptedModel, sdk, startServer } from './helpers.mjs';

const memory = modes.find((m) => m.name === 'memory');
const someId = '019ad1c8-0000-7000-8000-000000000000';

/** Runs `body` with a fresh client of `mode`, closed afterwards. */
async function withClient(mode, body) {
  const client = await mode.connect({});
  try {
    return await body(client);
  } finally {
    await client.close();
  }
}

describe('unknown outcomes (memory)', () => {
  test('nothing waits for a decision in memory', () =>
    withClient(memory, async (client) => {
      assert.deepEqual(await client.listUnknownOutcomes(), { items: [] });
      assert.deepEqual(await client.listUnknownOutcomes({ limit: 10 }), { items: [] });
    }));

  test('deciding in memory fails with InvalidInputError', () =>
    withClient(memory, async (client) => {
      await assert.rejects(client.decideOutcome(someId, { call: '1/tool:0/1', decision: 'give_up' }), (e) => {
        assert.ok(e instanceof sdk.InvalidInputError, `not an InvalidInputError: ${e}`);
        assert.match(e.message, /only a server has unknown outcomes/);
        return true;
      });
      await assert.rejects(client.decideOutcome(someId, { call: '1/tool:0/1', decision: 'perhaps' }), sdk.InvalidInputError);
    }));

  test('wrong argument types of the outcome calls throw TypeError before anything is sent', () =>
    withClient(memory, async (client) => {
      await assert.rejects(client.listUnknownOutcomes({ limit: 0 }), { name: 'TypeError', message: /options\.limit/ });
      await assert.rejects(client.listUnknownOutcomes({ cursor: 5 }), { name: 'TypeError', message: /options\.cursor/ });
      await assert.rejects(client.decideOutcome(7, { call: 'x', decision: 'give_up' }), { name: 'TypeError', message: /`executionId` must be a string/ });
      await assert.rejects(client.decideOutcome(someId, 'applied'), { name: 'TypeError', message: /`decision` must be an object/ });
      await assert.rejects(client.decideOutcome(someId, { decision: 'applied' }), { name: 'TypeError', message: /decision\.call/ });
      await assert.rejects(client.decideOutcome(someId, { call: 'x', decision: 'applied', result: 5 }), { name: 'TypeError', message: /decision\.result/ });
    }));
});

/** A local endpoint standing for a payment service: it never answers the first request. */
async function startEndpoint() {
  const calls = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      calls.push({ body: JSON.parse(body || 'null'), key: request.headers['idempotency-key'] });
      // The first answer is lost on the way back: its sender cannot know it was applied.
      if (calls.length > 1) response.writeHead(200, { 'content-type': 'text/plain' }).end('paid');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${server.address().port}/pay`,
    calls,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Waits (up to 30 s) until `check` gives a value. */
async function eventually(what, check) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('unknown outcomes (remote)', () => {
  test('a lost write is listed after a restart, decided applied, and not sent again', async () => {
    const endpoint = await startEndpoint();
    const first = await startServer({ leaseMs: 1000 });
    let second;
    try {
      const response = await fetch(`${first.url}/v1/tools/pay`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${first.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ description: 'Pays.', input_schema: { type: 'object' }, url: endpoint.url }),
      });
      assert.ok(response.ok, `registering the tool answered ${response.status}`);
      const client = await sdk.connect(first.url, { token: first.token });
      const model = scriptedModel({ steps: [{ tool_calls: [{ name: 'pay', arguments: { amount: 5 } }] }, { text: 'Paid.' }] });
      const bot = await client.createBot({ name: 'Payer', model, tools: [{ name: 'pay', input_schema: { type: 'object' } }] });
      const turn = await (await bot.createChat()).send('Pay 5');
      await eventually('the write', () => endpoint.calls.length === 1);
      first.kill();
      await client.close();

      second = await startServer({ data: first.data, token: first.token, leaseMs: 1000 });
      const again = await sdk.connect(second.url, { token: first.token });
      try {
        const page = await eventually('an unknown outcome', async () => {
          const listed = await again.listUnknownOutcomes({ limit: 10 });
          return listed.items.length > 0 ? listed : undefined;
        });
        assert.equal(page.next_cursor, undefined);
        const [waiting] = page.items;
        assert.equal(waiting.execution_id, turn.id);
        assert.equal(waiting.call, '1/tool:0/1');
        assert.equal(waiting.tool_call.name, 'pay');
        assert.deepEqual(waiting.tool_call.arguments, { amount: 5 });
        assert.equal(waiting.idempotency_key, endpoint.calls[0].key);

        const record = await again.decideOutcome(turn.id, { call: waiting.call, decision: 'applied', result: 'paid by hand' });
        assert.equal(record.decision, 'applied');
        assert.equal(record.execution_id, turn.id);
        const info = await again.execution(turn.id).wait();
        assert.equal(info.state, 'completed');
        assert.equal(endpoint.calls.length, 1, 'the write was not sent again');
        await assert.rejects(again.decideOutcome(turn.id, { call: waiting.call, decision: 'not_applied' }), sdk.ConflictError);
      } finally {
        await again.close();
      }
    } finally {
      first.kill();
      await second?.stop();
      await endpoint.close();
    }
  });
});
