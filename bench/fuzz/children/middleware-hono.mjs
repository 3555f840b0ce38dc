// The Idempotency-Key middleware on Hono, served by @hono/node-server, on a real SQLite ledger.
// The handler applies one counted effect per run. argv[2]: {"db": path}.
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { sqliteLedger } from "../../../dist/sqlite.js";
import { honoIdempotency } from "../../../dist/server.js";
import { effectCounter, serveIpc } from "./effects.mjs";

const { db } = JSON.parse(process.argv[2]);
const ledger = sqliteLedger(db);
const counter = effectCounter();
const app = new Hono();
app.use("*", honoIdempotency({ ledger }));
app.all("*", (c) => {
  if (c.req.method !== "POST" && c.req.method !== "PATCH") return c.json({ passed: c.req.method }, 200);
  const n = counter.apply(c.req.header("authorization"), c.req.header("idempotency-key"));
  return c.json({ effect: n }, 201);
});

const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, (info) => process.send({ op: "ready", port: info.port }));
serveIpc(counter, async () => {
  server.closeAllConnections?.();
  await new Promise((resolve) => server.close(resolve));
  await ledger.close();
});
// The fuzzer went away: so does the surface.
process.once("disconnect", () => process.exit(0));
