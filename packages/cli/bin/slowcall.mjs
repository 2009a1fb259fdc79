#!/usr/bin/env node
// Runs the TypeScript source of the slowcall command directly: packages export source, not builds.
import { register } from "tsx/esm/api"

register()
await import("../src/bin.ts")
