// enableTracing (docs/observability.md): a memory-mode Turn's GenAI spans reach an OTLP/HTTP
// receiver as protobuf. Its own file: export is turned on once per process.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { once } from 'node:events';
import { test } from 'node:test';

import { scriptedModel, sdk } from './helpers.mjs';

const addTool = {
  name: 'add',
  description: 'Adds two integers.',
  input_schema: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } } },
};

test('enableTracing exports a Turn as invoke_agent, chat and execute_tool spans over OTLP/HTTP', async () => {
  const bodies = [];
  const receiver = createServer((request, response) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      bodies.push({ path: request.url, type: request.headers['content-type'], body: Buffer.concat(chunks) });
      response.writeHead(200, { 'content-type': 'application/x-protobuf' });
      response.end();
    });
  });
  receiver.listen(0, '127.0.0.1');
  await once(receiver, 'listening');
  try {
    const endpoint = `http://127.0.0.1:${receiver.address().port}`;
    assert.equal(sdk.enableTracing({ endpoint, serviceName: 'node-sdk-test' }), true);
    const client = await sdk.connect('memory://', { tools: { add: async ({ a, b }) => String(a + b) } });
    try {
      const model = scriptedModel({
        steps: [{ tool_calls: [{ id: 'call_1', name: 'add', arguments: { a: 2, b: 3 } }] }, { text: 'Five.' }],
      });
      const bot = await client.createBot({ name: 'Adder', model, tools: [addTool] });
      await (await (await bot.createChat()).send('secret-sum-4417')).wait();
    } finally {
      await client.close();
    }
    sdk.flushTracing();
    const all = () => Buffer.concat(bodies.map((b) => b.body));
    for (let i = 0; i < 100 && !all().includes('execute_tool add'); i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.ok(bodies.length > 0, 'the receiver got an export');
    assert.ok(bodies.every((b) => b.path === '/v1/traces' && b.type === 'application/x-protobuf'));
    const sent = all();
    // Protobuf keeps strings as they are: the span names and attributes are in the bytes.
    for (const expected of ['invoke_agent Adder', 'execute_tool add', 'gen_ai.operation.name', 'node-sdk-test']) {
      assert.ok(sent.includes(expected), `the export holds ${expected}`);
    }
    assert.ok(sent.includes('chat '), 'a chat span');
    assert.ok(!sent.includes('secret-sum-4417'), 'no message text without the opt-in');
  } finally {
    receiver.close();
  }
});
