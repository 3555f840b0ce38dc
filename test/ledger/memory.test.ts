import { memoryLedger } from "../../src/stores/memory/index.js";
import { runLedgerContract } from "./contract.js";

runLedgerContract("memory", { make: () => memoryLedger() });
