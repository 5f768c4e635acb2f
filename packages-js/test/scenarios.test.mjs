// Runs every shared scenario of tests/scenarios/*.json in both modes, as its README says.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { collect, modes, replyOf, scriptedModel, sdk, stopServer, textOf } from './helpers.mjs';

const folder = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'tests', 'scenarios');
const scenarios = readdirSync(folder)
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((f) => ({ file: f, ...JSON.parse(readFileSync(join(folder, f), 'utf8')) }));

/** The behaviours every language implements the same way. */
const behaviours = {
  sum: ({ a, b }) => String(a + b),
  fail: () => {
    throw new Error('tool failed on purpose');
  },
};

/** Event types in order, each run of consecutive `text_delta` counted as one. */
function typesOf(events) {
  const types = [];
  for (const e of events) {
    if (e.type === 'text_delta' && types[types.length - 1] === 'text_delta') continue;
    types.push(e.type);
  }
  return types;
}

async function runOp(client, op) {
  switch (op.op) {
    case 'get_chat':
      return client.getChat(op.id);
    case 'get_bot':
      return client.getBot(op.id);
    case 'get_execution':
      return client.getExecution(op.id);
    case 'create_bot':
      return client.createBot(op.spec);
    default:
      throw new Error(`unknown scenario op ${op.op}`);
  }
}

after(stopServer);

for (const mode of modes) {
  describe(`scenarios (${mode.name})`, () => {
    for (const scenario of scenarios) {
      test(`${scenario.file}: ${scenario.description}`, async () => {
        const tools = {};
        for (const [name, behaviour] of Object.entries(scenario.tools ?? {})) tools[name] = behaviours[behaviour];
        const client = await mode.connect({ tools });
        try {
          const bot = await client.createBot({ ...scenario.bot, model: scriptedModel(scenario.script) });
          const chat = await bot.createChat();
          for (const [i, turn] of scenario.turns.entries()) {
            const execution = await chat.send(turn.send);
            const events = await collect(execution.events());
            const expect = turn.expect;
            const where = `turn ${i + 1}`;
            const end = events.find((e) => e.type === 'turn_ended');
            if (expect.outcome !== undefined) assert.equal(end?.outcome, expect.outcome, `${where}: outcome`);
            if (expect.events !== undefined) assert.deepEqual(typesOf(events), expect.events, `${where}: events`);
            if (expect.reply !== undefined) assert.equal(replyOf(events), expect.reply, `${where}: reply`);
            if (expect.tool_results !== undefined) {
              const results = events
                .filter((e) => e.type === 'tool_result')
                .map((e, k) => {
                  const want = expect.tool_results[k] ?? {};
                  const got = { name: e.result.name, is_error: e.result.is_error ?? false };
                  if ('text' in want) got.text = textOf(e.result.output);
                  return got;
                });
              assert.deepEqual(results, expect.tool_results, `${where}: tool results`);
            }
          }
          if (scenario.history !== undefined) {
            assert.equal((await chat.history()).length, scenario.history, 'history entries');
          }
          for (const op of scenario.errors ?? []) {
            await assert.rejects(runOp(client, op), (e) => {
              assert.ok(e instanceof sdk.OpenBotError, `${op.op}: an OpenBotError, not ${e}`);
              assert.equal(e.code, op.code, `${op.op}: code`);
              return true;
            });
          }
        } finally {
          await client.close();
        }
      });
    }
  });
}
