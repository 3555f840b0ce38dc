/** The demo's pure parts: the workload plan, the scripted model, the chart's escaping, the CLI's copies of defaults. */
import { describe, expect, it } from "vitest";
import { HELP_DEFAULT_SEED, HELP_DEFAULT_TASKS, LEVEL_KEYS } from "../../demo/cli/commands.js";
import { blastChart, escapeXml } from "../../demo/blast/chart.js";
import { LEVELS } from "../../demo/blast/levels/index.js";
import { nextTurn } from "../../demo/blast/model.js";
import type { BlastJson } from "../../demo/blast/report.js";
import { DEFAULT_SEED, DEFAULT_TASKS } from "../../demo/blast/runner.js";
import { buildWorkload } from "../../demo/blast/workload.js";

describe("the demo workload", () => {
  it("is a function of (seed, tasks) and plans every fault even in a small run", () => {
    expect(buildWorkload(5, 40)).toEqual(buildWorkload(5, 40));
    expect(buildWorkload(5, 40)).not.toEqual(buildWorkload(6, 40));
    const { tasks } = buildWorkload(5, 12);
    for (const planned of [(t: (typeof tasks)[number]) => t.crash, (t: (typeof tasks)[number]) => t.redeliver, (t: (typeof tasks)[number]) => t.hallucinate]) {
      expect(tasks.some((t) => planned(t) !== null)).toBe(true);
    }
    expect(tasks.some((t) => t.parallel)).toBe(true);
    expect(tasks.some((t) => t.runaway)).toBe(true);
    // Every effect carries its business reference.
    for (const task of tasks) for (const step of task.turns.flat()) expect(step.input.reference).toBe(step.ref);
  });

  it("the scripted model replays the same turns with the same tool_use ids, and corrects a hallucination only when told", () => {
    const task = buildWorkload(5, 40).tasks.find((t) => t.hallucinate !== null && t.kind !== "order")!;
    const first = nextTurn(task, 5, [])!;
    expect(first.blocks[0]?.name).toBe("lookup_customer");
    expect(nextTurn(task, 5, [])).toEqual(first);
    const ok = (ids: readonly { id: string }[], isError = false) => ids.map((b) => ({ type: "tool_result" as const, tool_use_id: b.id, content: "{}", is_error: isError }));
    // Walk the task answering everything with success: the bad call is accepted, never corrected.
    const answered: ReturnType<typeof ok>[] = [];
    const sent: unknown[] = [];
    for (let turn = nextTurn(task, 5, answered); turn; turn = nextTurn(task, 5, answered)) {
      sent.push(...turn.blocks.map((b) => b.input));
      answered.push(ok(turn.blocks));
    }
    expect(sent).toContainEqual(task.hallucinate!.bad);
    expect(sent).not.toContainEqual(task.turns.flat().find((s) => s.ref === task.hallucinate!.ref)!.input);
  });
});

describe("the demo's output", () => {
  it("escapes every text in the SVG", () => {
    expect(escapeXml(`<a href="x">&'`)).toBe("&lt;a href=&quot;x&quot;&gt;&amp;&apos;");
    const json: BlastJson = {
      seed: 1, tasks: 2,
      levels: [{
        level: 4, name: "+ <sagas>", adds: "x", available: false, waitingFor: "gate.saga & friends",
        duplicates: null, lost: null, halfDone: null, humanQueue: null, overQuota: null, wrongParams: null,
        discrepancies: { found: null, present: null }, toldDoneNotApplied: null, unresolved: null,
        overheadMs: { median: null, p99: null }, wallMs: null, calls: null, effects: null, kills: null, faults: null,
      }],
    };
    const svg = blastChart(json);
    expect(svg).toContain("+ &lt;sagas&gt;");
    expect(svg).toContain("waiting for gate.saga &amp; friends");
    expect(svg).not.toMatch(/<sagas>|& friends/);
  });

  it("the CLI's copies of the defaults and level keys agree with the demo", () => {
    expect(HELP_DEFAULT_TASKS).toBe(DEFAULT_TASKS);
    expect(HELP_DEFAULT_SEED).toBe(DEFAULT_SEED);
    expect([...LEVEL_KEYS]).toEqual(LEVELS.map((l) => l.key).sort((a, b) => (a === "ref" ? 1 : b === "ref" ? -1 : Number(a) - Number(b))));
  });
});
