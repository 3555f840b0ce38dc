import { memoryLedger } from "../../src/stores/memory/index.js";
import { runSagaLogContract } from "./contract.js";

runSagaLogContract("memory", { make: () => memoryLedger() });
