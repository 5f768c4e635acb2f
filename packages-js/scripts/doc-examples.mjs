// Writes each ```js block of a Markdown page to its own .mjs file in a folder and prints the
// file names, one a line, in page order. scripts/test-node runs them against the installed
// package, in memory and against a server; a block right after a `<!-- server only -->` line
// is written as `example-NN.server.mjs` and runs against the server only.
// Usage: node scripts/doc-examples.mjs <page.md> <folder>
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [page, folder] = process.argv.slice(2);
const blocks = [...readFileSync(page, 'utf8').matchAll(/^(<!-- server only -->\n)?```js\n([\s\S]*?)^```$/gm)].map((m) => ({
  serverOnly: m[1] !== undefined,
  code: m[2],
}));
blocks.forEach(({ serverOnly, code }, i) => {
  const file = join(folder, `example-${String(i + 1).padStart(2, '0')}${serverOnly ? '.server' : ''}.mjs`);
  writeFileSync(file, code);
  console.log(file);
});
