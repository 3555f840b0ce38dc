/**
 * effectgate/console: the operator console and its JSON API, for embedding in your own process
 * (`effectgate serve` runs the same server from the command line).
 *
 *   import { startConsole } from "effectgate/console";
 *   const server = await startConsole({ ledger, token: process.env.EFFECTGATE_CONSOLE_TOKEN! });
 *   console.log(server.url);
 */
export { startConsole, DEFAULT_CONSOLE_PORT, CONTENT_SECURITY_POLICY, type ConsoleOptions, type ConsoleServer } from "./root/console/server.js";
export { loadOrCreateToken, type ConsoleToken } from "./root/console/token.js";
export { searchCalls, callDetail, type CallSearch, type CallPage, type CallDetail } from "./root/console/calls.js";
