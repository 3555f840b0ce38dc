import { memoryLedger } from "../../src/stores/memory/calls.js";
import { runSagaLogContract } from "./contract.js";

runSagaLogContract("memory", { make: () => memoryLedger() });
