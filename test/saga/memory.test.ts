import { memoryLedger } from "../../src/ledger/memory.js";
import { runSagaLogContract } from "./contract.js";

runSagaLogContract("memory", { make: () => memoryLedger() });
