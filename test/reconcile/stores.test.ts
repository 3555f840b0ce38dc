import { join } from "node:path";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { tempDir } from "../support/tmp.js";
import { runReconcileContract } from "./contract.js";

const dir = tempDir("effectgate-reconcile-");
let n = 0;
runReconcileContract("memory", { make: () => memoryLedger() });
runReconcileContract("sqlite", { make: () => sqliteLedger(join(dir, `reconcile-${n++}.db`), { durability: "process" }) });
