import { memoryLedger } from "../../src/ledger/memory.js";
import { runLedgerContract } from "./contract.js";

runLedgerContract("memory", { make: () => memoryLedger() });
