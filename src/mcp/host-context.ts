/**
 * Which host connection a call came from, carried through the gate's async work so that the
 * approver can ask that host (elicitation) and the upstream request can carry that host's `_meta`.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";

export interface HostCall {
  /** The host's MCP server connection this call arrived on. */
  readonly server: Server;
  /** The host's `_meta` of the call, forwarded upstream (minus progressToken: progress is not relayed). */
  readonly meta: Record<string, unknown> | undefined;
}

export const hostCalls = new AsyncLocalStorage<HostCall>();

export function forwardedMeta(meta: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (!meta) return undefined;
  const { progressToken: _progress, ...rest } = meta;
  return rest;
}
