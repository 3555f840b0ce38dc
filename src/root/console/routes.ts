/**
 * The console's JSON API as a table of routes: the same operator layer the CLI uses
 * (governance/operator.ts, reconcile/queue.ts, saga/operator.ts), reached over HTTP.
 * docs/openapi.json documents exactly these routes; test/console/openapi.test.ts holds the two
 * together. Paths are OpenAPI templates; each `{name}` is one URL-encoded path segment.
 */
import type { Json } from "../../core/json.js";
import { CALL_STATES, type CallState } from "../../core/states.js";
import { APPROVAL_STATES } from "../../contracts/governance.js";
import { FINDING_KINDS, type FindingStatus } from "../../contracts/findings.js";
import type { Stores } from "../../contracts/stores.js";
import { SAGA_STATES } from "../../contracts/saga-states.js";
import type { SagaLog, SagaRecord } from "../../contracts/sagas.js";
import type { EffectClass } from "../../core/effect-class.js";
import { closeBreaker, countApprovals, countBreakers, decideCall, getApproval, listApprovals, listBreakers, listKillSwitches, setKillSwitch } from "../../governance/operator.js";
import { countQueue, listQueue, resolveQueueItem, showQueueItem, type QueueMove } from "../../reconcile/queue.js";
import { requestSagaCompensation, resolveSaga } from "../../saga/operator.js";
import { ApiError, badRequest, conflict, notFound } from "./api-error.js";
import { callDetail, searchCalls } from "./calls.js";
import { callState, choice, count, fields, filterText, flag, optionalString, requiredString, text, time, type Query } from "./params.js";

export interface RouteContext {
  readonly ledger: Stores;
  readonly params: Readonly<Record<string, string>>;
  readonly query: Query;
  readonly body: unknown;
  /** Who the change is recorded as made by, when the body names nobody. */
  readonly operator: string;
}

export interface Route {
  readonly method: "GET" | "POST";
  readonly path: string;
  /** True for routes that change the ledger (they wake the live-update stream). */
  readonly changes: boolean;
  readonly handle: (ctx: RouteContext) => Promise<Json | object>;
}

const by = (ctx: RouteContext, body: Record<string, unknown>) => optionalString(body, "by") ?? ctx.operator;
const get = (path: string, handle: Route["handle"]): Route => ({ method: "GET", path, changes: false, handle });
const post = (path: string, handle: Route["handle"]): Route => ({ method: "POST", path, changes: true, handle });
const param = (ctx: RouteContext, name: string) => ctx.params[name] ?? "";

function tenantOf(query: Query): { tenant?: string } {
  const tenant = filterText(query, "tenant");
  return tenant === undefined ? {} : { tenant };
}

/** The saga the path names, or a 404 (the operator layer's own refusal names the ledger's location and is a 400). */
async function mustHaveSaga(ctx: RouteContext): Promise<{ log: SagaLog; saga: SagaRecord }> {
  const tenant = param(ctx, "tenant");
  const id = param(ctx, "id");
  const log = ctx.ledger.sagas;
  const saga = await log?.get(tenant, id);
  if (!log || !saga) throw notFound(`no saga ${JSON.stringify(id)} in tenant ${JSON.stringify(tenant)}${log ? "" : " (this ledger keeps no saga log)"}`);
  return { log, saga };
}

/** A 404 naming what the path asked for when the ledger keeps no governance state (so no approvals nor breakers). */
function requireGovernance(ctx: RouteContext, what: string): void {
  if (!ctx.ledger.governance) throw notFound(`no ${what}: this ledger keeps no governance state`);
}

async function decide(ctx: RouteContext, approve: boolean): Promise<object> {
  const body = fields(ctx.body);
  const note = optionalString(body, "note");
  const id = param(ctx, "id");
  requireGovernance(ctx, `approval request ${JSON.stringify(id)}`);
  const decided = await decideCall(ctx.ledger, id, { approve, by: by(ctx, body), ...(note === undefined ? {} : { note }) });
  if (decided.ok) return { approval: decided.approval };
  switch (decided.reason) {
    case "not_found":
      throw notFound(`no approval request ${JSON.stringify(id)}`);
    case "expired":
      throw new ApiError(409, "expired", `approval request ${id} expired before anyone decided; its call will never run under it`);
    case "already_decided":
      throw conflict(`approval request ${id} is already ${decided.approval?.state ?? "decided"}${decided.approval?.decidedBy ? ` (by ${decided.approval.decidedBy})` : ""}; a decision is made once`);
  }
}

function queueMove(ctx: RouteContext): QueueMove {
  const body = fields(ctx.body);
  const note = optionalString(body, "note");
  const who = by(ctx, body);
  const extra = { by: who, ...(note === undefined ? {} : { note }) };
  const hasCompleted = "completedWith" in body;
  const failed = optionalString(body, "failed");
  if (hasCompleted && failed !== undefined) throw badRequest("give completedWith (the effect happened) or failed (it did not), not both");
  if (hasCompleted) return { completedWith: body.completedWith as Json, ...extra };
  if (failed !== undefined) return { failed, ...extra };
  if (note === undefined || note.trim() === "") throw badRequest("resolving needs a note (a finding), or completedWith / failed (a needs_human call)");
  return { note, by: who };
}

/**
 * Calls by state and effect class: how far the agent's actions reached, and how many wait for a
 * person. Exact: the store's own grouped count (CallStore.countByStateAndEffect), every state listed.
 */
async function blastRadius(ledger: Stores): Promise<object> {
  const byState = Object.fromEntries(CALL_STATES.map((state) => [state, { read: 0, write: 0, destructive: 0 }])) as Record<CallState, Record<EffectClass, number>>;
  for (const { state, effect, count } of await ledger.calls.countByStateAndEffect()) byState[state][effect] += count;
  return { byState };
}

/** The two figures every page's navigation shows: exact, and cheap (they read the waiting records, not the whole ledger). */
async function waiting(ledger: Stores): Promise<{ approvalsPending: number; queueSize: number }> {
  return {
    approvalsPending: ledger.governance ? await countApprovals(ledger, { state: "pending" }) : 0,
    queueSize: await countQueue(ledger),
  };
}

export const ROUTES: readonly Route[] = [
  // Every figure is an exact count, never a list's length (a list stops at its limit).
  get("/api/overview", async ({ ledger }) => {
    return {
      ledger: ledger.location,
      ...(await waiting(ledger)),
      killSwitches: ledger.governance ? await listKillSwitches(ledger) : [],
      openBreakers: ledger.governance ? await countBreakers(ledger) : 0,
      blastRadius: await blastRadius(ledger),
    };
  }),

  // The navigation's badges, refreshed on every page and live update: without the blast radius, which counts every call.
  get("/api/badges", async ({ ledger }) => waiting(ledger)),

  get("/api/calls", async ({ ledger, query }) => {
    const since = time(query, "since");
    const until = time(query, "until");
    const state = callState(query);
    const optional = { tool: filterText(query, "tool"), task: filterText(query, "task"), key: filterText(query, "key"), cursor: text(query, "cursor") };
    return searchCalls(ledger, {
      ...tenantOf(query), ...(state === undefined ? {} : { state }), ...(since === undefined ? {} : { since }), ...(until === undefined ? {} : { until }),
      ...Object.fromEntries(Object.entries(optional).filter(([, v]) => v !== undefined)),
      limit: count(query, "limit", 50, 500),
    });
  }),

  get("/api/calls/{tenant}/{key}", async (ctx) => {
    const detail = await callDetail(ctx.ledger, param(ctx, "tenant"), param(ctx, "key"));
    if (!detail) throw notFound(`no call with key ${JSON.stringify(param(ctx, "key"))} in tenant ${JSON.stringify(param(ctx, "tenant"))}`);
    return detail;
  }),

  get("/api/approvals", async ({ ledger, query }) => {
    if (!ledger.governance) return { approvals: [] };
    const state = text(query, "state") === "all" ? undefined : (choice(query, "state", APPROVAL_STATES) ?? "pending");
    return { approvals: await listApprovals(ledger, { ...tenantOf(query), ...(state === undefined ? {} : { state }), limit: count(query, "limit", 100) }) };
  }),

  get("/api/approvals/{id}", async (ctx) => {
    const approval = ctx.ledger.governance ? await getApproval(ctx.ledger, param(ctx, "id")) : undefined;
    if (!approval) throw notFound(`no approval request ${JSON.stringify(param(ctx, "id"))}`);
    return { approval };
  }),

  post("/api/approvals/{id}/approve", (ctx) => decide(ctx, true)),
  post("/api/approvals/{id}/deny", (ctx) => decide(ctx, false)),

  get("/api/queue", async ({ ledger, query }) => ({ items: await listQueue(ledger, { ...tenantOf(query), limit: count(query, "limit", 100) }) })),

  get("/api/queue/{id}", async (ctx) => {
    const shown = await showQueueItem(ctx.ledger, param(ctx, "id"), tenantOf(ctx.query));
    if (shown.found) return { item: shown.item };
    if (shown.why === "ambiguous") throw conflict(`key ${JSON.stringify(param(ctx, "id"))} exists in tenants ${shown.tenants.join(", ")}: pass ?tenant=`);
    throw notFound(`nothing in the queue or the ledger has the id ${JSON.stringify(param(ctx, "id"))}`);
  }),

  post("/api/queue/{id}/resolve", async (ctx) => {
    const move = queueMove(ctx);
    const tenant = optionalString(fields(ctx.body), "tenant");
    const done = await resolveQueueItem(ctx.ledger, param(ctx, "id"), move, tenant === undefined ? {} : { tenant });
    if ("found" in done) {
      if (done.why === "ambiguous") throw conflict(`key ${JSON.stringify(param(ctx, "id"))} exists in tenants ${done.tenants.join(", ")}: pass tenant`);
      throw notFound(`nothing in the queue or the ledger has the id ${JSON.stringify(param(ctx, "id"))}`);
    }
    return done;
  }),

  get("/api/sagas", async ({ ledger, query }) => {
    if (!ledger.sagas) return { sagas: [] };
    const state = choice(query, "state", SAGA_STATES);
    return { sagas: await ledger.sagas.list({ ...tenantOf(query), ...(state === undefined ? {} : { state }), limit: count(query, "limit", 100) }) };
  }),

  get("/api/sagas/{tenant}/{id}", async (ctx) => {
    const tenant = param(ctx, "tenant");
    const id = param(ctx, "id");
    const { log, saga } = await mustHaveSaga(ctx);
    return { saga, steps: await log.steps(tenant, id), history: await log.history(tenant, id) };
  }),

  post("/api/sagas/{tenant}/{id}/compensate", async (ctx) => {
    await mustHaveSaga(ctx);
    const body = fields(ctx.body);
    return { saga: await requestSagaCompensation(ctx.ledger, param(ctx, "tenant"), param(ctx, "id"), requiredString(body, "note"), by(ctx, body)) };
  }),

  post("/api/sagas/{tenant}/{id}/resolve", async (ctx) => {
    await mustHaveSaga(ctx);
    const body = fields(ctx.body);
    const outcome = optionalString(body, "outcome");
    if (outcome !== "undone" && outcome !== "kept") throw badRequest(`outcome must be "undone" (you undid the effects by hand) or "kept" (they stay, knowingly)`);
    return { saga: await resolveSaga(ctx.ledger, param(ctx, "tenant"), param(ctx, "id"), { note: requiredString(body, "note"), outcome, by: by(ctx, body) }) };
  }),

  get("/api/findings", async ({ ledger, query }) => {
    if (!ledger.reconcile) return { findings: [] };
    const status = choice<FindingStatus>(query, "status", ["open", "resolved"]) ?? "open";
    const kind = choice(query, "kind", FINDING_KINDS);
    const tool = filterText(query, "tool");
    return {
      findings: await ledger.reconcile.listFindings({
        ...tenantOf(query), status, ...(kind === undefined ? {} : { kind }), ...(tool === undefined ? {} : { tool }), limit: count(query, "limit", 100),
      }),
    };
  }),

  get("/api/kill", async ({ ledger }) => ({ killSwitches: ledger.governance ? await listKillSwitches(ledger) : [] })),

  post("/api/kill", async (ctx) => {
    const body = fields(ctx.body);
    if (!ctx.ledger.governance) throw conflict("this ledger keeps no governance state: it has no kill switch to turn on or off");
    if (typeof body.on !== "boolean") throw badRequest("on is required: true turns the switch on, false turns it off");
    const tenant = optionalString(body, "tenant");
    const agent = optionalString(body, "agent");
    const reason = optionalString(body, "reason");
    const target = { ...(tenant === undefined ? {} : { tenant }), ...(agent === undefined ? {} : { agent }) };
    const changed = await setKillSwitch(ctx.ledger, body.on, target, { by: by(ctx, body), ...(reason === undefined ? {} : { reason }) });
    return { changed, killSwitches: await listKillSwitches(ctx.ledger) };
  }),

  get("/api/breakers", async ({ ledger, query }) => ({ breakers: ledger.governance ? await listBreakers(ledger, { includeClosed: flag(query, "all") }) : [] })),

  post("/api/breakers/{id}/close", async (ctx) => {
    requireGovernance(ctx, `open rate breaker ${JSON.stringify(param(ctx, "id"))}`);
    const closed = await closeBreaker(ctx.ledger, param(ctx, "id"), by(ctx, fields(ctx.body)));
    if (!closed) throw notFound(`no open rate breaker ${JSON.stringify(param(ctx, "id"))}`);
    return { breaker: closed };
  }),
];

/** The route for a method and path, with its path parameters decoded; undefined when none matches. */
export function matchRoute(method: string, pathname: string): { route: Route; params: Record<string, string> } | "wrong_method" | undefined {
  const segments = pathname.split("/");
  let pathMatched = false;
  for (const route of ROUTES) {
    const parts = route.path.split("/");
    if (parts.length !== segments.length) continue;
    const params: Record<string, string> = {};
    let ok = true;
    for (let i = 0; i < parts.length && ok; i++) {
      const part = parts[i] ?? "";
      const segment = segments[i] ?? "";
      if (part.startsWith("{")) {
        try {
          params[part.slice(1, -1)] = decodeURIComponent(segment);
        } catch {
          ok = false;
        }
        ok &&= segment !== "";
      } else ok = part === segment;
    }
    if (!ok) continue;
    pathMatched = true;
    if (route.method === method) return { route, params };
  }
  return pathMatched ? "wrong_method" : undefined;
}
