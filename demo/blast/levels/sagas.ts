/** Level 4: order workflows (reserve → charge → ship) run as sagas that undo completed steps when a later one fails. */
import { gateLevel } from "./gate.js";

export const sagas = gateLevel({
  key: "4",
  name: "+ sagas",
  adds: "level 3, and each order's reserve → charge → ship runs as a saga (scope.saga): when the shipment is refused, the charge is refunded and the reservation released, each undo itself a gated call; an undo that fails goes to a human",
  sagas: true,
});
