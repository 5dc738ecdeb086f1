// Types of rlm-client (index.mjs): the twin of clients/python.

export interface ModelUsageSummary {
  total_calls: number;
  total_input_tokens: number;
  total_output_tokens: number;
  /** USD, present only when the server knows the price of every call. */
  total_cost?: number;
}

export interface RLMChatCompletion {
  root_model: string;
  prompt: unknown;
  response: string;
  usage_summary: { model_usage_summaries: Record<string, ModelUsageSummary> };
  execution_time: number;
  metadata: { run_id: string; answer_source: string; no_final: boolean; usage: Record<string, number>; events?: RunEvent[] };
}

/** One event of a run (POST /runs' NDJSON lines): iteration, llm_call, code, subcall, final... */
export interface RunEvent {
  type: string;
  depth?: number;
  iteration?: number;
  [field: string]: unknown;
}

export interface RLMOptions {
  backend?: string;
  backend_kwargs?: { model_name?: string };
  other_backends?: string[];
  other_backend_kwargs?: { model_name?: string }[];
  /** As the reference's: it counts the root (1: no recursion). */
  max_depth?: number;
  max_iterations?: number;
  /** USD. */
  max_budget?: number;
  /** Seconds. */
  max_timeout?: number;
  max_tokens?: number;
  max_errors?: number;
  /** rlm serve's address (default $RLM_URL). */
  base_url?: string;
  /** Its bearer token (default $RLM_TOKEN). */
  token?: string;
  on_event?: (ev: RunEvent) => void;
  on_iteration_start?: (depth: number, iteration: number) => void;
  keep_events?: boolean;
}

export class RLM {
  constructor(opts?: RLMOptions);
  run_id?: string;
  completion(prompt: unknown, rootPrompt?: string, opts?: { signal?: AbortSignal }): Promise<RLMChatCompletion>;
  cancel(): Promise<void>;
}

export class RLMError extends Error {
  kind: string;
  status: Record<string, unknown>;
}
export class ServerError extends RLMError {
  httpStatus: number;
  code: string;
}
export class TokenLimitExceededError extends RLMError {
  tokens_used: number;
  token_limit?: number;
}
export class BudgetExceededError extends RLMError {
  spent: number;
  budget?: number;
}
export class TimeoutExceededError extends RLMError {
  elapsed: number;
  timeout?: number;
}
export class CancellationError extends RLMError {}
