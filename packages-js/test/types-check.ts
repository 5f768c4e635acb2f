// Compiled (not run) by scripts/test-node with tsc --strict: the package's declarations give
// useful types, and wrong uses are type errors.
import {
  connect,
  NotFoundError,
  type ApprovalRequest,
  type ApprovalState,
  type ExecutionInfo,
  type ExecutionKind,
  type OutcomeDecision,
  type OutcomeDecisionRecord,
  type PlanMode,
  type ToolContext,
  type UnknownOutcome,
  type ApiToken,
  type CreatedToken,
  type StoredFile,
  type Bytes,
  type Page,
  type Turn,
  type ExecutionEnd,
} from '../dist/index';

export async function typed(): Promise<ExecutionInfo> {
  const tools = {
    add: async (args: { a: number; b: number }, context: ToolContext) => `${args.a + args.b} ${context.callId}`,
  };
  const client = await connect('memory://', { tools });
  const bot = await client.createBot({ name: 'Typed', model: 'scripted:x.json', limits: { max_steps: 3 } });
  const chat = await bot.createChat();
  const execution = await chat.send('Hi', { commandKey: 'k' });
  for await (const event of execution.events()) {
    if (event.type === 'text_delta') {
      const text: string = event.text;
      void text;
    }
    if (event.type === 'tool_result') {
      const thrown: unknown = event.error;
      const failed: boolean | undefined = event.result.is_error;
      void thrown, failed;
    }
  }
  for await (const event of client.events(execution.id)) {
    if (event.type === 'child_started') {
      const child: string = event.child_id;
      const call: string = event.call_id;
      void child, call;
    }
    if (event.type === 'approval_requested') {
      const request: string = event.request_id;
      const tool: string = event.call.name;
      const expires: string = event.expires_at;
      void request, tool, expires;
    }
    if (event.type === 'job_ended') {
      const state: ExecutionInfo['state'] = event.state;
      void state;
    }
  }
  const pending: ApprovalRequest[] = await client.listApprovals({ state: 'pending' });
  const all: ApprovalRequest[] = await client.listApprovals();
  for (const request of [...pending, ...all]) {
    const state: ApprovalState = request.state;
    const job: string = request.execution_id;
    const decided: ApprovalRequest = await client.decideApproval(request.id, { decision: 'approve', reason: 'fine' });
    const kind: ExecutionKind = (await client.getExecution(decided.execution_id)).kind;
    void state, job, kind;
  }
  // @ts-expect-error: a state is one of the schema's
  await client.listApprovals({ state: 'maybe' });
  // @ts-expect-error: a decision is approve or deny
  await client.decideApproval('019ad1c8-0000-7000-8000-000000000000', { decision: 'perhaps' });
  // @ts-expect-error: the decision is an object
  await client.decideApproval('019ad1c8-0000-7000-8000-000000000000', 'approve');
  for await (const waiting of client.listUnknownOutcomes({ limit: 10 })) {
    const item: UnknownOutcome = waiting;
    void item;
    const tool: string = waiting.tool_call.name;
    const decided: OutcomeDecisionRecord = await client.decideOutcome(waiting.execution_id, {
      call: waiting.call,
      decision: 'applied',
      result: 'paid',
    });
    const decision: OutcomeDecision = decided.decision;
    void tool, decision;
  }
  for await (const page of client.listUnknownOutcomes({ cursor: 'c' }).pages()) {
    const first: Page<UnknownOutcome> = page;
    const next: string | undefined = page.nextCursor;
    void first, next;
  }
  const everything: UnknownOutcome[] = await client.listUnknownOutcomes().toArray();
  const awaited: UnknownOutcome[] = await client.listUnknownOutcomes({ limit: 50 });
  void everything, awaited;
  // @ts-expect-error: a page size is a number
  client.listUnknownOutcomes({ limit: 'ten' });
  // Every operation, typed from the schema.
  const tokens: ApiToken[] = await client.listTokens();
  const created: CreatedToken = await client.createToken({ name: 'ci', rights: [] });
  await client.revokeToken(created.token.id);
  const file: StoredFile = await client.uploadFile(Buffer.from('hi'), 'text/plain', { name: 'hi.txt' });
  const content: Bytes = await client.fileContent(file.id);
  const bytes: Buffer = content.data;
  const media: string = content.contentType;
  void tokens, bytes, media;
  // @ts-expect-error: a token needs its rights
  await client.createToken({ name: 'ci' });
  // @ts-expect-error: an upload needs its name
  await client.uploadFile('hi', 'text/plain', {});
  // The generic call: typed by operation.
  const health: string = (await client.call('health')).status;
  const viaCall: ApiToken[] = (await client.call('list_tokens')).items;
  void health, viaCall;
  // @ts-expect-error: not an operation of the API
  await client.call('list_everything');
  // Handles.
  const turn: Turn = await chat.send('again');
  const end: ExecutionEnd = await turn.wait();
  const answer: string = end.text;
  void answer;
  // @ts-expect-error: a decision is applied, not_applied or give_up
  await client.decideOutcome('019ad1c8-0000-7000-8000-000000000000', { call: '1/tool:0/1', decision: 'maybe' });
  // @ts-expect-error: a decision names its call
  await client.decideOutcome('019ad1c8-0000-7000-8000-000000000000', { decision: 'give_up' });
  const mode: PlanMode = await client.setPlanMode('019ad1c8-0000-7000-8000-000000000000', true);
  const on: boolean = (await client.planMode('019ad1c8-0000-7000-8000-000000000000')).enabled;
  const paused: ExecutionInfo = await client.pauseExecution('019ad1c8-0000-7000-8000-000000000000');
  const resumed: ExecutionInfo = await client.resumeExecution(paused.id);
  void mode, on, resumed;
  // @ts-expect-error: plan mode is on or off
  await client.setPlanMode('019ad1c8-0000-7000-8000-000000000000', 'yes');
  try {
    await client.getChat('019ad1c8-0000-7000-8000-000000000000');
  } catch (e) {
    if (e instanceof NotFoundError) {
      const code: 'not_found' | string = e.code;
      void code;
    }
  }
  // @ts-expect-error: a spec is an object
  await client.createBot('Greeter');
  // @ts-expect-error: a BotSpec needs a model
  await client.createBot({ name: 'No model' });
  // @ts-expect-error: input is text or content parts
  await chat.send(42);
  return execution.wait();
}
