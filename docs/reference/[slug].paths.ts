import { referenceModules, renderModule } from "../.vitepress/reference.ts"

export default {
  paths() {
    return referenceModules().map((m) => ({ params: { slug: m.slug }, content: renderModule(m) }))
  }
}
