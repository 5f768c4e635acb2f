// What the generated operations (operations.ts) use at run time: argument checks, bytes, and
// the `Paged` iterator over a paged list.

/** Path and query parameters of one call, by name. */
export type Params = Record<string, unknown>;

/** Bytes an operation answered (a file's content), with their media type. */
export interface Bytes {
  /** The bytes. */
  data: Buffer;
  /** Their media type, e.g. `text/plain`. */
  contentType: string;
}

/** Bytes to send (text is sent as UTF-8), with their media type. */
export interface BytesInput {
  /** The bytes. */
  data: Uint8Array | string;
  /** Their media type. */
  contentType: string;
}

/** One page of a paged list: its items and, unless it is the last, the cursor of the next. */
export interface Page<T> {
  /** The items on this page. */
  items: T[];
  /** Where the next page starts (pass it as `cursor`); absent on the last page. */
  nextCursor?: string;
}

/**
 * A paged list: `for await (const item of list)` reads every item, page after page, asking the
 * next page only when the items before it were read; `pages()` gives whole pages (with the
 * cursor to resume from); `await list` (or `toArray()`) reads every page and gives all the
 * items, so a list that becomes paged reads as it did. Nothing is asked before it is read.
 */
export class Paged<T> implements AsyncIterable<T>, PromiseLike<T[]> {
  /** @internal */
  constructor(
    private readonly fetchPage: (cursor: string | undefined) => Promise<Page<T>>,
    private readonly start: string | undefined,
  ) {}

  /** The pages, from the cursor the list was asked with. */
  async *pages(): AsyncGenerator<Page<T>, void, undefined> {
    let cursor = this.start;
    do {
      const page = await this.fetchPage(cursor);
      yield page;
      cursor = page.nextCursor;
    } while (cursor !== undefined);
  }

  /** Every item, page after page. */
  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for await (const page of this.pages()) yield* page.items;
  }

  /** Every item of every page, read to the end. */
  async toArray(): Promise<T[]> {
    const all: T[] = [];
    for await (const item of this) all.push(item);
    return all;
  }

  /** `await list`: every item of every page (see `toArray`). */
  then<R1 = T[], R2 = never>(
    onfulfilled?: ((items: T[]) => R1 | PromiseLike<R1>) | null,
    onrejected?: ((reason: unknown) => R2 | PromiseLike<R2>) | null,
  ): Promise<R1 | R2> {
    return this.toArray().then(onfulfilled, onrejected);
  }
}

/** Says what a wrong value is, short, for a TypeError. */
export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  const shown = String(value);
  return `${typeof value} ${shown.length > 40 ? `${shown.slice(0, 40)}...` : shown}`.trim();
}

export function checkString(where: string, name: string, value: unknown): string {
  if (typeof value !== 'string') {
    throw new TypeError(`${where}: \`${name}\` must be a string, not ${describe(value)}`);
  }
  return value;
}

export function checkObject(where: string, name: string, value: unknown): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TypeError(`${where}: \`${name}\` must be an object, not ${describe(value)}`);
  }
  return value as Record<string, unknown>;
}

const kinds: Record<string, [string, (value: unknown) => boolean]> = {
  string: ['a string', (v) => typeof v === 'string'],
  integer: ['a whole number', (v) => typeof v === 'number' && Number.isSafeInteger(v)],
  number: ['a number', (v) => typeof v === 'number' && Number.isFinite(v)],
  boolean: ['a boolean', (v) => typeof v === 'boolean'],
  object: ['an object', (v) => typeof v === 'object' && v !== null && !Array.isArray(v)],
  array: ['an array', (v) => Array.isArray(v)],
};

/**
 * Checks an object's fields of plain types, as the schema declares them: `'string!'` must be a
 * string, `'string?'` may also be absent or null. The server checks the rest (ranges,
 * patterns, nested values) and answers `InvalidInputError`.
 */
export function checkFields(where: string, name: string, value: unknown, fields: Record<string, string>): void {
  const object = checkObject(where, name, value);
  for (const [field, rule] of Object.entries(fields)) {
    const found = object[field];
    const optional = rule.endsWith('?');
    if (optional && (found === undefined || found === null)) continue;
    const kind = kinds[rule.slice(0, -1)];
    if (kind && !kind[1](found)) {
      throw new TypeError(`${where}: \`${name}.${field}\` must be ${kind[0]}, not ${describe(found)}`);
    }
  }
}

/** Bytes to send: a Uint8Array (a Buffer is one) as is, text as UTF-8. */
export function bytesOf(where: string, data: unknown, contentType: string): BytesInput {
  if (typeof data === 'string' || data instanceof Uint8Array) return { data, contentType };
  throw new TypeError(`${where}: \`data\` must be a Uint8Array or a string, not ${describe(data)}`);
}
