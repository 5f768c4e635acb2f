// Pausing and plan mode: refused (pause) and off (plan mode) in memory; against a real
// `openbot serve`, plan mode set and read back, and a Turn paused, resumed and completed.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';

import { modes, scriptedModel, sdk, stopServer } from './helpers.mjs';

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

describe('pause and plan mode (memory)', () => {
  test('pausing is InvalidInputError and plan mode is off', () =>
    withClient(memory, async (client) => {
      const bot = await client.createBot({ name: 'Local', model: scriptedModel({ steps: [{ text: 'ok' }] }) });
      const chat = await bot.createChat();
      assert.deepEqual(await client.planMode(chat.id), { enabled: false });
      await assert.rejects(client.setPlanMode(chat.id, true), sdk.InvalidInputError);
      const turn = await chat.send('Hi');
      await turn.wait();
      await assert.rejects(client.pauseExecution(turn.id), (e) => {
        assert.ok(e instanceof sdk.InvalidInputError, `not an InvalidInputError: ${e}`);
        assert.equal(e.code, 'invalid_input');
        return true;
      });
      await assert.rejects(client.resumeExecution(turn.id), sdk.InvalidInputError);
      await assert.rejects(client.setPlanMode(chat.id, 'yes'), { name: 'TypeError', message: /`enabled` must be a boolean/ });
    }));
});

describe('pause and plan mode (remote)', () => {
  test('plan mode is set on a Chat, read back and turned off', () =>
    withClient(remote, async (client) => {
      const bot = await client.createBot({ name: 'Planner', model: scriptedModel({ steps: [{ text: 'ok' }] }) });
      const chat = await bot.createChat();
      assert.deepEqual(await client.planMode(chat.id), { enabled: false });
      assert.deepEqual(await client.setPlanMode(chat.id, true), { enabled: true });
      assert.deepEqual(await client.planMode(chat.id), { enabled: true });
      assert.deepEqual(await client.setPlanMode(chat.id, false), { enabled: false });
      assert.deepEqual(await client.planMode(chat.id), { enabled: false });
    }));

  test('a paused Turn resumes and completes', () =>
    withClient(remote, async (client) => {
      const model = scriptedModel({ steps: [{ text: 'ok', delay_ms: 300 }] });
      const bot = await client.createBot({ name: 'Pausable', model });
      const turn = await (await bot.createChat()).send('Hi');
      const paused = await client.pauseExecution(turn.id);
      assert.equal(paused.id, turn.id);
      const resumed = await client.resumeExecution(turn.id);
      assert.equal(resumed.id, turn.id);
      const info = await turn.wait();
      assert.equal(info.state, 'completed');
    }));
});
