import { memoryLedger } from "../../src/stores/memory/calls.js";
import { runLedgerContract } from "./contract.js";

runLedgerContract("memory", { make: () => memoryLedger() });
