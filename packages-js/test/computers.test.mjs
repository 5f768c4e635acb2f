// This machine as a Computer in memory mode: a Bot works in a real terminal and on files inside
// the allowed folders (docs/computers.md).
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { collect, scriptedModel, sdk, tempDir, textOf } from './helpers.mjs';

test('a Bot in memory writes a file and reads it back through a terminal', async () => {
  const folder = tempDir('openbot-node-computer-');
  const client = await sdk.connect('memory://', { computer: { folders: [folder] } });
  try {
    const model = scriptedModel({
      steps: [
        { tool_calls: [{ id: 'w', name: 'computer_file_write', arguments: { path: 'note.txt', content: 'from node\n' } }] },
        { tool_calls: [{ id: 's', name: 'computer_terminal_start', arguments: { command: 'cat note.txt' } }] },
        { tool_calls: [{ id: 'r', name: 'computer_terminal_read', arguments: { session_id: 't1', wait_ms: 5000 } }] },
        { text: 'done' },
      ],
    });
    const bot = await client.createBot({ name: 'Operator', model, tools: [...sdk.COMPUTER_TOOLS] });
    const events = await collect((await (await bot.createChat()).send('go')).events());
    const results = events.filter((e) => e.type === 'tool_result').map((e) => e.result);
    assert.equal(results.length, 3);
    assert.ok(results.every((r) => !r.is_error), JSON.stringify(results));
    assert.equal(readFileSync(join(folder, 'note.txt'), 'utf8'), 'from node\n');
    const output = JSON.parse(textOf(results[2].output));
    assert.match(output.chunks.map((c) => c.text).join(''), /from node/);
  } finally {
    await client.close();
  }
});

test('a Computer without terminal offers the file tools only, inside its folders', async () => {
  const folder = tempDir('openbot-node-computer-');
  const outside = tempDir('openbot-node-outside-');
  writeFileSync(join(outside, 'secret.txt'), 'keep out');
  const client = await sdk.connect('memory://', { computer: { folders: [folder], terminal: false } });
  try {
    const model = scriptedModel({
      steps: [
        { tool_calls: [{ id: 'o', name: 'computer_file_read', arguments: { path: join(outside, 'secret.txt') } }] },
        { tool_calls: [{ id: 's', name: 'computer_terminal_start', arguments: {} }] },
        { text: 'done' },
      ],
    });
    const bot = await client.createBot({ name: 'Reader', model, tools: [...sdk.COMPUTER_TOOLS] });
    const events = await collect((await (await bot.createChat()).send('go')).events());
    const results = events.filter((e) => e.type === 'tool_result').map((e) => e.result);
    assert.equal(results.length, 2);
    assert.equal(results[0].is_error, true);
    assert.match(textOf(results[0].output), /outside the folders/);
    // The terminal tools are not offered: the model's call names an unknown tool.
    assert.equal(results[1].is_error, true, JSON.stringify(results[1]));
    assert.match(textOf(results[1].output), /unknown tool/);
  } finally {
    await client.close();
  }
});

test('a Computer folder that does not exist is an InvalidInputError at connect', async () => {
  const missing = join(tempDir('openbot-node-computer-'), 'nope');
  assert.ok(!existsSync(missing));
  await assert.rejects(sdk.connect('memory://', { computer: { folders: [missing] } }), sdk.InvalidInputError);
  await assert.rejects(sdk.connect('memory://', { computer: { folders: [] } }), sdk.InvalidInputError);
});

test('a Computer with a server is an InvalidInputError: a server pairs its Computers', async () => {
  await assert.rejects(
    sdk.connect('http://127.0.0.1:9', { computer: { folders: [tempDir()] } }),
    sdk.InvalidInputError,
  );
});
