// Builds the API reference from the source: every exported name of every public module, with its doc comment
// and its declaration (bodies elided). The pages are generated at build time, so they cannot drift from the code.
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"

const root = fileURLToPath(new URL("../..", import.meta.url))

/** Packages whose modules are public API, in the order the sidebar shows them. */
const packages = [
  "core",
  "testing",
  "adapter-postgres",
  "adapter-redis",
  "adapter-sqs",
  "promise",
  "providers",
  "simulator",
  "http",
  "schedules"
] as const

export interface ReferenceModule {
  readonly packageName: string
  readonly module: string
  readonly slug: string
  readonly file: string
}

const isModuleFile = (name: string) =>
  /^[A-Z][A-Za-z0-9]*\.ts$/.test(name) && name !== "index.ts" && !name.endsWith(".d.ts")

/** Every public module: PascalCase files directly under `packages/<pkg>/src` (not `internal/`, not `index.ts`). */
export const referenceModules = (): Array<ReferenceModule> => {
  const out: Array<ReferenceModule> = []
  for (const pkg of packages) {
    const dir = join(root, "packages", pkg, "src")
    let names: Array<string>
    try {
      names = readdirSync(dir).filter((n) => isModuleFile(n) && statSync(join(dir, n)).isFile())
    } catch {
      continue
    }
    const packageName = readPackageName(pkg)
    for (const name of names.sort()) {
      const module = name.slice(0, -3)
      out.push({ packageName, module, slug: `${pkg}-${module}`, file: join(dir, name) })
    }
  }
  return out
}

const readPackageName = (pkg: string): string => {
  try {
    return JSON.parse(readFileSync(join(root, "packages", pkg, "package.json"), "utf8")).name as string
  } catch {
    return `@slowcall/${pkg}`
  }
}

interface Entry {
  readonly name: string
  readonly kind: string
  readonly category: string
  readonly since: string | undefined
  readonly doc: string
  readonly signature: string
}

const hasExport = (node: ts.Node): boolean =>
  ts.canHaveModifiers(node) && (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword)

const jsDocOf = (node: ts.Node): { doc: string; tags: Map<string, string> } => {
  const tags = new Map<string, string>()
  const docs = (node as { jsDoc?: Array<ts.JSDoc> }).jsDoc ?? []
  const last = docs.at(-1)
  if (last === undefined) return { doc: "", tags }
  const doc = typeof last.comment === "string" ? last.comment : (ts.getTextOfJSDocComment(last.comment) ?? "")
  for (const tag of last.tags ?? []) {
    const text = typeof tag.comment === "string" ? tag.comment : (ts.getTextOfJSDocComment(tag.comment) ?? "")
    tags.set(tag.tagName.text, text.trim())
  }
  return { doc: doc.trim(), tags }
}

const maxSignatureLines = 40

const clip = (text: string): string => {
  const lines = text.split("\n")
  return lines.length <= maxSignatureLines ? text : `${lines.slice(0, maxSignatureLines).join("\n")}\n  // ...`
}

const signatureOf = (node: ts.Node, source: ts.SourceFile): string => {
  const text = (from: number, to: number) => source.text.slice(from, to).trim()
  const start = node.getStart(source)
  if (ts.isFunctionDeclaration(node) && node.body) return text(start, node.body.getStart(source))
  if (ts.isClassDeclaration(node)) {
    const brace = source.text.indexOf("{", node.heritageClauses?.at(-1)?.end ?? node.name?.end ?? start)
    return `${text(start, brace)} { ... }`
  }
  if (ts.isVariableStatement(node)) {
    const decl = node.declarationList.declarations[0]
    if (decl === undefined) return text(start, node.end)
    const init = decl.initializer
    if (decl.type) return text(start, decl.type.end)
    if (init && ts.isArrowFunction(init)) return `${text(start, init.equalsGreaterThanToken.end)} ...`
    if (
      init &&
      (ts.isCallExpression(init) || ts.isObjectLiteralExpression(init)) &&
      init.getText(source).length > 160
    ) {
      return `${text(start, init.getStart(source))}...`
    }
  }
  return clip(text(start, node.end))
}

const kindOf = (node: ts.Node): string => {
  if (ts.isFunctionDeclaration(node)) return "function"
  if (ts.isClassDeclaration(node)) return "class"
  if (ts.isInterfaceDeclaration(node)) return "interface"
  if (ts.isTypeAliasDeclaration(node)) return "type"
  if (ts.isEnumDeclaration(node)) return "enum"
  return "const"
}

const nameOf = (node: ts.Node): string | undefined => {
  if (ts.isVariableStatement(node)) {
    const d = node.declarationList.declarations[0]
    return d && ts.isIdentifier(d.name) ? d.name.text : undefined
  }
  const named = node as { name?: ts.Node }
  return named.name && ts.isIdentifier(named.name) ? named.name.text : undefined
}

const entriesOf = (file: string): { header: string; entries: Array<Entry> } => {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true)
  const first = source.statements[0]
  const header = first ? jsDocOf(first).doc : ""
  const entries: Array<Entry> = []
  for (const node of source.statements) {
    if (!hasExport(node)) continue
    const name = nameOf(node)
    if (name === undefined) continue
    const { doc, tags } = jsDocOf(node)
    if (tags.has("internal")) continue
    entries.push({
      name,
      kind: kindOf(node),
      category: tags.get("category") ?? "other",
      since: tags.get("since"),
      doc,
      signature: signatureOf(node, source)
    })
  }
  // The module comment sits on the first statement; when that statement is itself exported, it is not the header.
  const firstIsExported = first !== undefined && hasExport(first)
  return { header: firstIsExported ? "" : header, entries }
}

/** Escapes prose for VitePress: outside code spans, `<`, `>` and `{{` would be read as HTML or Vue. */
const prose = (text: string): string =>
  text
    .split(/(`[^`]*`)/)
    .map((part, i) =>
      i % 2 === 1 ? part : part.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;")
    )
    .join("")
    .replace(/\{@link\s+([^}]+)\}/g, "`$1`")

const categoryOrder = ["models", "services", "constructors", "layers", "combinators", "commands", "errors", "testing"]

/** The Markdown of one module's reference page. */
export const renderModule = (m: ReferenceModule): string => {
  const { entries, header } = entriesOf(m.file)
  const categories = [...new Set(entries.map((e) => e.category))].sort(
    (a, b) => (categoryOrder.indexOf(a) + 1 || 99) - (categoryOrder.indexOf(b) + 1 || 99) || a.localeCompare(b)
  )
  const lines: Array<string> = [
    `# ${m.module}`,
    "",
    `\`import * as ${m.module} from "${m.packageName}/${m.module}"\``,
    "",
    "::: v-pre",
    "",
    header.length > 0 ? prose(header) : "",
    ""
  ]
  for (const category of categories) {
    lines.push(`## ${category}`, "")
    for (const e of entries.filter((x) => x.category === category)) {
      lines.push(`### ${e.name}`, "")
      lines.push(`<small>${e.kind}${e.since ? ` · since ${e.since}` : ""}</small>`, "")
      if (e.doc.length > 0) lines.push(prose(e.doc), "")
      lines.push("```ts", e.signature, "```", "")
    }
  }
  lines.push(":::", "")
  return lines.join("\n")
}

/** The overview rows: every module with the first sentence of its module comment. */
export const referenceSummaries = (): Array<ReferenceModule & { readonly summary: string }> =>
  referenceModules().map((m) => {
    const { header } = entriesOf(m.file)
    return { ...m, summary: (header.split(/(?<=\.)\s/)[0] ?? "").replaceAll("\n", " ") }
  })
