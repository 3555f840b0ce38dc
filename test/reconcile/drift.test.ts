import { join } from "node:path";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { tempDir } from "../support/tmp.js";
import { runDriftScenario } from "./drift.js";

const dir = tempDir("effectgate-drift-");
runDriftScenario("memory", () => memoryLedger());
runDriftScenario("sqlite", () => sqliteLedger(join(dir, "drift.db"), { durability: "process" }));
