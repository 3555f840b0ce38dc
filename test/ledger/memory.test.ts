import * as vitest from "vitest";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { contractSuite } from "../../src/testing/contract-suite.js";

contractSuite({ vitest, name: "memory", open: () => memoryLedger() });
