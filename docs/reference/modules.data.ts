import { referenceSummaries } from "../.vitepress/reference.ts"

export interface ModuleRow {
  readonly packageName: string
  readonly module: string
  readonly slug: string
  readonly summary: string
}

declare const data: Array<ModuleRow>

export { data }

export default {
  load(): Array<ModuleRow> {
    return referenceSummaries().map(({ module, packageName, slug, summary }) => ({
      module,
      packageName,
      slug,
      summary
    }))
  }
}
