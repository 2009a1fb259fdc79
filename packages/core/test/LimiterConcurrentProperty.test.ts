/**
 * The concurrent model-based property of the Limiter on the memory Limiter: each call is one synchronous step, so a
 * batch's calls run one after another, which the check must accept.
 */
import * as Limiter from "@slowcall/core/Limiter"
import { LimiterConcurrentProperty } from "@slowcall/testing/LimiterConcurrentProperty"

LimiterConcurrentProperty({ name: "memory", layer: Limiter.layerMemory, freshPerRun: true })
