/** Level 5: after the run, the ledger is reconciled against the downstreams through each tool's lookup. */
import { gateLevel } from "./gate.js";

export const reconciliation = gateLevel({
  key: "5",
  name: "+ ledger reconciliation",
  adds: "level 4, and after the run gate.reconcile() lists what ticketing, payments and storage hold and reports every record that differs from the ledger (missing, orphan, duplicate, mismatched)",
  sagas: true,
  reconcile: true,
});
