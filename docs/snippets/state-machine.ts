import * as StateMachine from "@slowcall/core/StateMachine"
import { Effect } from "effect"

// The table is data: every Store consults it (or mirrors it in SQL / Lua) and the simulator checks recorded
// histories against it.
console.log(StateMachine.next("queued", "claim")) // "running"
console.log(StateMachine.next("succeeded", "replay")) // undefined: succeeded is absorbing
console.log(StateMachine.isLegal("failed", "queued")) // true: only through a replay

// As an Effect, an illegal event is a typed InvalidTransition failure.
const program = StateMachine.transition("abandoned", "claim").pipe(
  Effect.catchTag("InvalidTransition", (e) => Effect.succeed(e.message))
)
Effect.runPromise(program).then(console.log)
