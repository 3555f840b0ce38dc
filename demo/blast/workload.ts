/**
 * The reference workload of `effectgate demo`: a support-and-billing agent's tasks, planned
 * from a seed. Everything here is data and pure functions: the same (seed, tasks) gives the same
 * plan in the CLI process, in every worker process and in the tests.
 *
 * Every effect call carries a business reference (`reference`: task id + step), and the plan
 * says for each reference which input was intended and whether the task needs it. That is what
 * the ground truth (truth.ts) compares the downstream services' records with: two effects with
 * one reference are a duplicate of one logical call, never two calls.
 */
import { seededRandom } from "../random.js";

/** Tools the scripted model calls. The downstream service and effect class of each are in tools.ts. */
export type ToolName =
  | "lookup_customer" | "create_ticket" | "send_email" | "delete_draft"
  | "charge_card" | "reserve_stock" | "ship_order" | "refund_charge" | "release_stock";

export type TaskKind = "support" | "billing" | "order";

/** Where a worker process is SIGKILLed, relative to one call (see docs/demo.md). */
export type KillPoint =
  /** The call is about to go out (the gate has claimed it); nothing was sent. */
  | "before_call"
  /** The downstream applied the effect and answered; nothing has recorded the answer yet. */
  | "after_effect"
  /** The protection layer recorded the answer (if it records anything); the agent's checkpoint has not. */
  | "after_record";
export const KILL_POINTS: readonly KillPoint[] = ["before_call", "after_effect", "after_record"];

export type Input = Readonly<Record<string, string | number>>;

/** One logical call of a task, with the input the task intends. */
export interface Step {
  /** Business reference, e.g. "task-0007/charge": every downstream effect of this call carries it. */
  readonly ref: string;
  readonly tool: ToolName;
  readonly input: Input;
  /** The task needs this effect to happen (false for the extra calls of a runaway loop). */
  readonly required: boolean;
}

export interface Task {
  readonly index: number;
  /** "task-0007": the task (conversation) id, also the scope's task. */
  readonly id: string;
  readonly tenant: string;
  readonly customer: string;
  readonly kind: TaskKind;
  /** The planned assistant turns after the customer look-up; a turn with two steps is a parallel tool use. */
  readonly turns: readonly (readonly Step[])[];
  /** The model first sends this step with wrong parameters; it corrects them only when told they are wrong. */
  readonly hallucinate: { readonly ref: string; readonly bad: Input; readonly what: string } | null;
  /** After its one draft deletion, the model loops and deletes more drafts (not required, over quota). */
  readonly runaway: boolean;
  /** order tasks: the warehouse refuses the shipment (a business failure: the saga must undo reserve and charge). */
  readonly shipFails: boolean;
  /** order tasks whose shipment fails: this compensation is refused by its downstream too. */
  readonly compensationFails: "refund_charge" | "release_stock" | null;
  /** The worker running this task is SIGKILLed at this call and point, then a fresh process resumes. */
  readonly crash: { readonly ref: string; readonly point: KillPoint } | null;
  /** The assistant message holding this step is delivered to the tool layer twice. */
  readonly redeliver: string | null;
  /** Two workers run this task at the same time (the same job handed out twice). */
  readonly parallel: boolean;
  /**
   * Business references whose effect the downstream later removes on its own (a charge voided by
   * the card network, a ticket merged away): drift that only reconciliation can see.
   */
  readonly drift: readonly string[];
}

export interface Workload {
  readonly seed: number;
  readonly tasks: readonly Task[];
}

/** Destructive effects one task may apply; what governance would set as its quota. */
export const DESTRUCTIVE_QUOTA_PER_TASK = 2;
/** Drafts a runaway loop deletes in all. */
export const RUNAWAY_DELETES = 12;

const TENANTS = ["acme", "globex", "initech"] as const;
const SUBJECTS = [
  "Card terminal shows error E42", "Invoice shows the wrong VAT rate", "Login link expired twice",
  "Parcel arrived damaged", "Double-check my subscription tier", "Export to CSV drops umlauts",
] as const;
const SKUS = ["SKU-TERM-01", "SKU-ROLL-80", "SKU-DOCK-02", "SKU-CABL-10"] as const;

/** Shares of the workload (at least one of each fault is planned whenever there are enough tasks). */
const MIX = {
  order: 0.3, billing: 0.2,
  shipFails: 0.35, compensationFails: 0.4,
  crash: 0.04, redeliver: 0.08, parallel: 0.05, hallucinate: 0.1, runaway: 0.04, drift: 0.05,
} as const;

export function buildWorkload(seed: number, count: number): Workload {
  if (!Number.isSafeInteger(count) || count < 1) throw new RangeError(`the workload needs at least one task, got ${count}`);
  const rng = seededRandom(seed ^ 0x5eed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(rng() * items.length)] as T;
  const kinds: TaskKind[] = Array.from({ length: count }, () => {
    const u = rng();
    return u < MIX.order ? "order" : u < MIX.order + MIX.billing ? "billing" : "support";
  });
  // Chosen without replacement, at least one each (when the kind exists), so that a small run still shows every fault.
  const choose = (share: number, eligible: (i: number) => boolean): Set<number> => {
    const pool = kinds.map((_, i) => i).filter(eligible);
    const n = pool.length === 0 ? 0 : Math.max(1, Math.round(share * pool.length));
    const chosen = new Set<number>();
    while (chosen.size < n) chosen.add(pool[Math.floor(rng() * pool.length)] as number);
    return chosen;
  };
  const orders = (i: number) => kinds[i] === "order";
  const shipFails = choose(MIX.shipFails, orders);
  const compensationFails = choose(MIX.compensationFails, (i) => shipFails.has(i));
  const runaway = choose(MIX.runaway, (i) => kinds[i] === "support");
  const parallel = choose(MIX.parallel, (i) => !runaway.has(i));
  const crash = choose(MIX.crash, (i) => !parallel.has(i));
  const redeliver = choose(MIX.redeliver, () => true);
  const hallucinate = choose(MIX.hallucinate, (i) => !runaway.has(i));
  const drift = choose(MIX.drift, (i) => kinds[i] !== "order");

  const tasks = kinds.map((kind, index): Task => {
    const id = `task-${String(index + 1).padStart(4, "0")}`;
    const customer = `cus_${String(1 + Math.floor(rng() * 9000)).padStart(4, "0")}`;
    const turns = planTurns(kind, id, customer, runaway.has(index), {
      subject: pick(SUBJECTS), sku: pick(SKUS), quantity: 1 + Math.floor(rng() * 3), amount: 5 + Math.floor(rng() * 400),
    });
    const steps = turns.flat();
    const firstEffects = steps.filter((s) => s.required);
    let bad: Task["hallucinate"] = null;
    if (hallucinate.has(index)) bad = hallucination(pick(firstEffects.filter((s) => HALLUCINABLE.has(s.tool))));
    const crashable = firstEffects.filter((s) => s.ref !== bad?.ref && !(kind === "order" && s.tool === "ship_order" && shipFails.has(index)));
    return {
      index, id, tenant: TENANTS[index % TENANTS.length] as string, customer, kind, turns,
      hallucinate: bad,
      runaway: runaway.has(index),
      shipFails: shipFails.has(index),
      compensationFails: compensationFails.has(index) ? (rng() < 0.5 ? "refund_charge" : "release_stock") : null,
      crash: crash.has(index) && crashable.length > 0 ? { ref: pick(crashable).ref, point: pick(KILL_POINTS) } : null,
      redeliver: redeliver.has(index) ? pick(firstEffects).ref : null,
      parallel: parallel.has(index),
      // A ticket or a billing charge (order charges are left alone: sagas may refund them).
      drift: drift.has(index) ? [`${id}/${kind === "billing" ? "charge" : "ticket"}`] : [],
    };
  });
  return { seed, tasks };
}

function planTurns(
  kind: TaskKind, id: string, customer: string, runaway: boolean,
  p: { subject: string; sku: string; quantity: number; amount: number },
): Step[][] {
  const email = `${customer.replace("cus_", "customer-")}@example.com`;
  const step = (name: string, tool: ToolName, input: Record<string, string | number>, required = true): Step =>
    ({ ref: `${id}/${name}`, tool, input: { ...input, reference: `${id}/${name}` }, required });
  const order = `ord_${id.slice(5)}`;
  switch (kind) {
    case "support": {
      const turns: Step[][] = [
        [step("ticket", "create_ticket", { customer, subject: p.subject, priority: "normal" })],
        [
          step("email", "send_email", { to: email, subject: `Re: ${p.subject}`, body: "We have opened a ticket and will get back to you today." }),
          step("draft-1", "delete_draft", { draft: `draft_${id.slice(5)}_1` }),
        ],
      ];
      if (runaway) {
        for (let n = 2; n <= RUNAWAY_DELETES; n++) turns.push([step(`draft-${n}`, "delete_draft", { draft: `draft_${id.slice(5)}_${n}` }, false)]);
      }
      return turns;
    }
    case "billing":
      return [
        [step("charge", "charge_card", { customer, amount: p.amount, currency: "EUR" })],
        [step("email", "send_email", { to: email, subject: "Your receipt", body: `We charged ${p.amount} EUR to your card on file.` })],
      ];
    case "order":
      return [
        [step("reserve", "reserve_stock", { order, sku: p.sku, quantity: p.quantity })],
        [step("charge", "charge_card", { customer, amount: p.amount, currency: "EUR" })],
        [step("ship", "ship_order", { order, address: `${customer} delivery address` })],
        [step("email", "send_email", { to: email, subject: `Order ${order} shipped`, body: "Your order is on its way." })],
      ];
  }
}

const HALLUCINABLE = new Set<ToolName>(["create_ticket", "send_email", "charge_card"]);

/** Wrong parameters a model plausibly invents, each one the downstream accepts but the tool's schema does not. */
function hallucination(step: Step): NonNullable<Task["hallucinate"]> {
  switch (step.tool) {
    case "create_ticket":
      return { ref: step.ref, bad: { ...step.input, customer: "Hanna Berg" }, what: "customer name instead of customer id" };
    case "send_email":
      return { ref: step.ref, bad: { ...step.input, to: String(step.input.to).replace("@", "(at)") }, what: "malformed e-mail address" };
    default:
      return { ref: step.ref, bad: { ...step.input, amount: Number(step.input.amount) * 100 }, what: "amount in cents instead of euros" };
  }
}

/** Saga steps of an order (reserve → charge → ship) and the compensation of each that has one. */
export const SAGA_STEPS: ReadonlyMap<ToolName, ToolName | null> = new Map<ToolName, ToolName | null>([
  ["reserve_stock", "release_stock"],
  ["charge_card", "refund_charge"],
  ["ship_order", null],
]);

/** The business reference of a compensation of `ref`. */
export const undoRef = (ref: string) => `${ref}/undo`;

export function allSteps(task: Task): Step[] {
  return task.turns.flat();
}
