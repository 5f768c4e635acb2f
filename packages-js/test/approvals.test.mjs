// Approvals and child work: listApprovals and decideApproval in memory, and against a real
// `openbot serve` a registered HTTP tool with an `ask` rule, decided through the SDK.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import { after, describe, test } from 'node:test';

import { collect, modes, scriptedModel, sdk, stopServer, textOf } from './helpers.mjs';

after(stopServer);

const memory = modes.find((m) => m.name === 'memory');
const remote = modes.find((m) => m.name === 'remote');

/** Runs `body` with a fresh client of `mode`, closed afterwards. */
async function withClient(mode, body) {
  const client = await mode.connect({});
  try {
    return await body(client);
  } finally {
    await client.close();
  }
}

describe('approvals (memory)', () => {
  test('listApprovals is empty in memory', () =>
    withClient(memory, async (client) => {
      assert.deepEqual(await client.listApprovals(), []);
      assert.deepEqual(await client.listApprovals({ state: 'pending' }), []);
    }));

  test('deciding an unknown approval request fails with NotFoundError', () =>
    withClient(memory, async (client) => {
      await assert.rejects(client.decideApproval('019ad1c8-0000-7000-8000-000000000000', { decision: 'approve' }), (e) => {
        assert.ok(e instanceof sdk.NotFoundError, `not a NotFoundError: ${e}`);
        assert.equal(e.code, 'not_found');
        return true;
      });
    }));

  test('an unknown approval state or decision fails with InvalidInputError', () =>
    withClient(memory, async (client) => {
      await assert.rejects(async () => client.listApprovals({ state: 'maybe' }).toArray(), sdk.InvalidInputError);
      const id = '019ad1c8-0000-7000-8000-000000000000';
      await assert.rejects(client.decideApproval(id, { decision: 'perhaps' }), sdk.InvalidInputError);
      await assert.rejects(client.decideApproval('not-an-id', { decision: 'deny' }), {
        name: 'InvalidInputError',
        message: /`not-an-id` is not a valid `id` for decide_approval/,
      });
    }));

  test('wrong argument types of the approval calls throw TypeError before anything is sent', () =>
    withClient(memory, async (client) => {
      await assert.rejects(async () => client.listApprovals('pending').toArray(), { name: 'TypeError', message: /listApprovals: `options` must be an object/ });
      await assert.rejects(async () => client.listApprovals({ state: 1 }).toArray(), { name: 'TypeError', message: /options\.state/ });
      await assert.rejects(client.decideApproval(7, { decision: 'deny' }), { name: 'TypeError', message: /decideApproval: `id` must be a string/ });
      await assert.rejects(client.decideApproval('x', 'deny'), { name: 'TypeError', message: /decideApproval: `body` must be an object/ });
      await assert.rejects(client.decideApproval('x', { decision: 'deny', reason: 3 }), { name: 'TypeError', message: /`body\.reason` must be a string, not number 3/ });
    }));
});

/** A local HTTP endpoint standing for a write to the world: it counts the calls it gets. */
async function startEndpoint() {
  const calls = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      calls.push({ body: JSON.parse(body || 'null'), key: request.headers['idempotency-key'] });
      response.writeHead(200, { 'content-type': 'text/plain' }).end('paid');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${server.address().port}/pay`,
    calls,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/** A request to the server's HTTP API with the admin token; gives the JSON answer. */
async function api(target, method, path, body) {
  const response = await fetch(`${target.uri}${path}`, {
    method,
    headers: { authorization: `Bearer ${target.token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  assert.ok(response.ok, `${method} ${path} answered ${response.status}: ${text}`);
  return JSON.parse(text);
}

let tools = 0;

/**
 * Registers `endpoint` as an HTTP tool under a fresh name with an `ask` rule, and creates a Bot
 * whose model calls it once and then answers. Gives the Bot and the tool's name.
 */
async function payingBot(client, endpoint) {
  const tool = `pay_${process.pid}_${++tools}`;
  const target = remote.target();
  await api(target, 'PUT', `/v1/tools/${tool}`, {
    description: 'Pays an amount.',
    input_schema: { type: 'object' },
    url: endpoint.url,
  });
  await api(target, 'POST', '/v1/approval-rules', { tool, action: 'ask' });
  const model = scriptedModel({
    steps: [{ tool_calls: [{ id: 'call_1', name: tool, arguments: { amount: 5 } }] }, { text: 'I asked for approval.' }],
  });
  const bot = await client.createBot({ name: 'Payer', model, tools: [{ name: tool, input_schema: { type: 'object' } }] });
  return { bot, tool };
}

/** Sends input to a new Chat of `bot`; gives the Turn's events (to its end) and its two child events. */
async function askForPayment(bot) {
  const chat = await bot.createChat();
  const turn = await chat.send('Pay 5');
  const events = await collect(turn.events());
  const requested = events.find((e) => e.type === 'approval_requested');
  const child = events.find((e) => e.type === 'child_started');
  assert.ok(requested, `no approval_requested event in ${events.map((e) => e.type)}`);
  assert.ok(child, `no child_started event in ${events.map((e) => e.type)}`);
  return { chat, events, requested, child };
}

describe('approvals (remote)', () => {
  test('an approved call runs once, in a child tool_job that ends with job_ended', () =>
    withClient(remote, async (client) => {
      const endpoint = await startEndpoint();
      try {
        const { bot, tool } = await payingBot(client, endpoint);
        const { events, requested, child } = await askForPayment(bot);
        assert.equal(events.at(-1).type, 'turn_ended', 'the Turn ends while approval waits');
        assert.equal(requested.call.name, tool);
        assert.deepEqual(requested.call.arguments, { amount: 5 });
        assert.equal(child.call_id, requested.call.id);
        assert.equal(child.kind, 'tool_job');
        assert.equal(endpoint.calls.length, 0, 'nothing runs before the decision');

        const pending = (await client.listApprovals({ state: 'pending' })).filter((r) => r.call.name === tool);
        assert.equal(pending.length, 1);
        assert.equal(pending[0].id, requested.request_id);
        assert.equal(pending[0].state, 'pending');
        assert.equal(pending[0].execution_id, child.child_id);
        assert.equal(pending[0].bot_id, bot.id);

        const decided = await client.decideApproval(requested.request_id, { decision: 'approve', reason: 'fine' });
        assert.equal(decided.state, 'approved');
        assert.equal(decided.reason, 'fine');

        const jobEvents = await collect(client.events(child.child_id));
        const ended = jobEvents.at(-1);
        assert.equal(ended.type, 'job_ended');
        assert.equal(ended.state, 'completed');
        const job = await client.execution(child.child_id).wait();
        assert.equal(job.kind, 'tool_job');
        assert.equal(job.state, 'completed');
        assert.equal(endpoint.calls.length, 1, 'the approved call ran exactly once');
        assert.deepEqual(endpoint.calls[0].body, { amount: 5 });
        assert.deepEqual(
          (await client.listApprovals({ state: 'pending' })).filter((r) => r.call.name === tool),
          [],
        );
      } finally {
        await endpoint.close();
      }
    }));

  test("an approved call's result reaches the Chat's history as a notice from its child", () =>
    withClient(remote, async (client) => {
      const endpoint = await startEndpoint();
      try {
        const { bot, tool } = await payingBot(client, endpoint);
        const { chat, requested, child } = await askForPayment(bot);
        await client.decideApproval(requested.request_id, { decision: 'approve' });
        await client.execution(child.child_id).wait();
        const notices = (await chat.history())
          .filter((entry) => entry.execution_id === child.child_id)
          .map((entry) => textOf(entry.message.content));
        assert.ok(
          notices.some((text) => text.includes(`\`${tool}\``) && text.includes('finished') && text.includes('paid')),
          `no result notice in ${JSON.stringify(notices)}`,
        );
      } finally {
        await endpoint.close();
      }
    }));

  test('a denied call never reaches its endpoint and its child job ends cancelled', () =>
    withClient(remote, async (client) => {
      const endpoint = await startEndpoint();
      try {
        const { bot } = await payingBot(client, endpoint);
        const { requested, child } = await askForPayment(bot);
        const decided = await client.decideApproval(requested.request_id, { decision: 'deny', reason: 'too much' });
        assert.equal(decided.state, 'denied');
        assert.equal(decided.reason, 'too much');
        const jobEvents = await collect(client.events(child.child_id));
        assert.equal(jobEvents.at(-1).type, 'job_ended');
        assert.equal(jobEvents.at(-1).state, 'cancelled');
        await assert.rejects(client.execution(child.child_id).wait(), sdk.CancelledError);
        assert.equal(endpoint.calls.length, 0, 'a denied call never runs');
      } finally {
        await endpoint.close();
      }
    }));

  test('deciding a request twice fails with ConflictError', () =>
    withClient(remote, async (client) => {
      const endpoint = await startEndpoint();
      try {
        const { bot } = await payingBot(client, endpoint);
        const { requested } = await askForPayment(bot);
        await client.decideApproval(requested.request_id, { decision: 'deny' });
        await assert.rejects(client.decideApproval(requested.request_id, { decision: 'approve' }), sdk.ConflictError);
        assert.equal(endpoint.calls.length, 0);
      } finally {
        await endpoint.close();
      }
    }));
});
