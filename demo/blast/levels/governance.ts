/** Level 6: a governance policy in front of the tools: a quota on destructive calls and a rate breaker. */
import { DESTRUCTIVE_QUOTA_PER_TASK } from "../workload.js";
import { gateLevel } from "./gate.js";

export const governance = gateLevel({
  key: "6",
  name: "+ governance",
  adds: `level 5, and a policy: at most ${DESTRUCTIVE_QUOTA_PER_TASK} destructive calls per task, a rate breaker that opens after 4 in a minute (a person closes it), and draft deletions approved by a rule in code`,
  sagas: true,
  reconcile: true,
  governance: {
    policy: {
      quotas: [{ id: "drafts-per-task", per: "task", class: "destructive", limit: DESTRUCTIVE_QUOTA_PER_TASK }],
      rateLimits: [{ id: "destructive-burst", per: "task", class: "destructive", limit: 4, windowMs: 60_000 }],
    },
    // Every destructive call needs an approval; this rule grants draft deletions (the quota and the breaker bound them).
    approver: (request) => (request.tool === "delete_draft" ? { approve: true, by: "rule: draft deletions" } : undefined),
  },
});
