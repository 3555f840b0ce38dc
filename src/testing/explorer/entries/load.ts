/**
 * Loads an explorer entry by name (entry.ts): its module, and with it its SDK, only now. A missing
 * optional peer is said in one sentence naming the package to install.
 */
import { EffectgateError } from "../../../core/errors.js";
import { ENTRY_NAMES, gateEntry, type AskEntry, type EntryName } from "./entry.js";
import type { WorldEntry } from "./world-entry.js";

export type { WorldEntry };

export type Entry = AskEntry | WorldEntry;

/** Which SDK package each entry needs, to say so when it is missing. */
const PEERS: Readonly<Record<EntryName, string>> = {
  "gate": "",
  "ai-sdk": "ai",
  "openai-agents": "@openai/agents",
  "anthropic": "@anthropic-ai/sdk",
  "langchain": "langchain, @langchain/core and @langchain/langgraph",
  "mcp": "@modelcontextprotocol/sdk",
  "langchain-hitl": "langchain, @langchain/core and @langchain/langgraph",
  "middleware": "hono",
};

export async function loadEntry(name: EntryName): Promise<Entry> {
  if (!(ENTRY_NAMES as readonly string[]).includes(name)) {
    throw new EffectgateError("EG_BAD_OPTION", `the explorer has no entry named ${JSON.stringify(name)} (its entries: ${ENTRY_NAMES.join(", ")})`);
  }
  try {
    switch (name) {
      case "gate":
        return gateEntry;
      case "ai-sdk":
        return (await import("./ai-sdk.js")).aiSdkEntry;
      case "openai-agents":
        return (await import("./openai-agents.js")).openAiAgentsEntry;
      case "anthropic":
        return (await import("./anthropic.js")).anthropicEntry;
      case "langchain":
        return (await import("./langchain.js")).langchainEntry;
      case "langchain-hitl":
        return (await import("./langchain-hitl.js")).langchainHitlEntry;
      case "mcp":
        return (await import("./mcp.js")).mcpEntry;
      case "middleware":
        return (await import("./middleware.js")).middlewareEntry;
    }
  } catch (err) {
    if (isMissingModule(err)) {
      throw new EffectgateError("EG_BAD_OPTION",
        `the explorer's "${name}" entry needs ${PEERS[name]} (an optional peer), which could not be loaded (${(err as Error).message}). Install it, or choose another entry.`, { cause: err });
    }
    throw err;
  }
}

function isMissingModule(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND";
}
