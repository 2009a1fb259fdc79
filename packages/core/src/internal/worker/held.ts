/**
 * What a worker holds: one record per leased job, from the claim until its outcome is stored (waiting in the local
 * queue, running, or being written). The keeper (`lease.ts`) renews it, the attempt (`attempt.ts`) runs it.
 *
 * @internal
 */
import type { Tracer } from "effect"
import type { Job } from "../../Job.js"
import * as Lease from "../../Lease.js"
import type { Delivery } from "../../Transport.js"
import * as Control from "./control.js"

/**
 * One job a worker holds a lease on: the job as claimed, its handler's lease, the attempt's control block and, with
 * a transport that delivers messages, the delivery that brought it.
 *
 * @internal
 */
export interface Held {
  readonly job: Job
  readonly leaseMs: number
  readonly control: Control.Control
  readonly delivery: Delivery | undefined
  /** Local clock ms at which the next renewal is due. */
  nextBeatAt: number
  /**
   * The heartbeat call (numbered by the keeper in send order; 0: the claim) whose reply last set the lease's local
   * end. A reply of an earlier call, landing after a later one's, sets nothing: the later send is the later end
   * (whatever the clock did between the two sends), and its reply already renewed the permits and the delivery.
   */
  renewedBy: number
  /** The heartbeat call that last carried the attempt's progress (0: none), so a failed one puts back only the latest. */
  progressBy: number
  /** The running attempt's span (parent of its heartbeat spans) while tracing; `undefined` otherwise. */
  span: Tracer.AnySpan | undefined
}

/**
 * A held job whose lease was granted by a claim sent at `sentAt` (local clock).
 *
 * @internal
 */
export const hold = (job: Job, leaseMs: number, sentAt: number, delivery: Delivery | undefined): Held => ({
  job,
  leaseMs,
  control: Control.make({ localLeaseEnd: sentAt + leaseMs, costCents: job.costCents }),
  delivery,
  nextBeatAt: sentAt + Lease.heartbeatIntervalFor(leaseMs),
  renewedBy: 0,
  progressBy: 0,
  span: undefined
})
