// TypeScript declarations of sqlite-idempotency/openai-agents (openai-agents.js).
import type { RunContext, ToolExecuteArgument, ToolInputParameters, ToolOptions, ToolOutputSchema } from '@openai/agents';
import type { Ledger } from './index.js';
import type { AllowedByResult, CallOptions, KeyPartResult, TargetsResult } from './agent-tools.js';

export { currentAttempt, ToolCallError } from './agent-tools.js';
export type { AllowedByResult, CallOptions, KeyPart, KeyPartResult, TargetsResult, ToolCallDecision } from './agent-tools.js';

/**
 * What idempotentTool needs besides the tool: the key's who and conversation,
 * from each call. Context is the run's context (`run(agent, input, { context })`,
 * an `Agent<Context>`): name it once, `(input, runContext: RunContext<Ctx>) => ...`;
 * unnamed, it is a record of any fields. A function that throws refuses the
 * call as no tenant / no conversation.
 */
export interface IdempotentToolOptions<INPUT, Context> extends CallOptions {
  /** the tenant of the call (from the run's context, set by the application), never from the model */
  tenant: (input: INPUT, runContext: RunContext<Context>, details: unknown) => KeyPartResult;
  /** the conversation of the call (e.g. from the run's context); never the callId, which the SDK mints anew on re-plan */
  conversation: (input: INPUT, runContext: RunContext<Context>, details: unknown) => KeyPartResult;
  /** what the call's write touches, from the input's identifying fields (never its wording): a target another call of the tenant holds refuses the call as a conflict */
  targets?: (input: INPUT) => TargetsResult;
  /** who allows a deliberate second write to a held target (the application's, never the model's), or nothing */
  allowedBy?: (input: INPUT, runContext: RunContext<Context>, details: unknown) => AllowedByResult;
}

/**
 * The options of tool(), with an execute that runs at most once per tenant
 * + conversation + name + canonical input. A replay's output is a note and
 * the first output as JSON; a refusal's or recorded failure's is the text
 * the model reads (never thrown). name defaults the tool's name.
 */
export function idempotentTool<TParameters extends ToolInputParameters, Context = Record<string, any>, TOutputSchema extends ToolOutputSchema | undefined = undefined>(
  ledger: Ledger,
  name: string,
  options: IdempotentToolOptions<ToolExecuteArgument<TParameters>, Context>,
  toolOptions: ToolOptions<TParameters, Context, TOutputSchema>,
): ToolOptions<TParameters, Context, TOutputSchema>;
