/**
 * Help text for the `slowcall` commands, written from each command's own descriptions, and the runner that prints it.
 *
 * `@effect/cli` renders help with a generic line on every option ("A user-defined piece of text.", "This setting is
 * optional."), lists a `--wizard` mode, and pads the command list to the longest usage line of the whole tree. Here
 * help is built from what the commands declare (names, value names, descriptions, defaults, environment variables,
 * whether an option is required or repeatable) and wrapped to the terminal: an option is marked `required` only when
 * the parser refuses a run without it, every other one sits behind `[options]` in the usage line.
 *
 * It lives beside the `simulate` command for the same reason that command does: the `slowcall` executable
 * (`@slowcall/cli`) and the simulator's own script both run it, and the simulator may not depend on the CLI.
 *
 * @since 0.3.0
 */
import { type CliApp, Command, HelpDoc, ValidationError } from "@effect/cli"
import type * as Span from "@effect/cli/HelpDoc/Span"
import { Console, Effect } from "effect"

/**
 * One option as help shows it. `names` are the spellings the parser accepts (`--user-waiting`, `--no-user-waiting`);
 * `value` names what follows the flag (none for a flag that takes no value).
 *
 * @since 0.3.0
 * @category models
 */
export interface OptionHelp {
  readonly names: ReadonlyArray<string>
  readonly value: string | undefined
  readonly description: string
  /** The parser refuses a run without it. */
  readonly required: boolean
  readonly repeatable: boolean
  readonly defaultValue: string | undefined
  /** The environment variable read when the option is absent. */
  readonly env: string | undefined
}

/**
 * One positional argument as help shows it.
 *
 * @since 0.3.0
 * @category models
 */
export interface ArgumentHelp {
  readonly name: string
  readonly description: string
  readonly required: boolean
  readonly repeatable: boolean
  readonly defaultValue: string | undefined
}

/**
 * A command and everything below it, as help shows them.
 *
 * @since 0.3.0
 * @category models
 */
export interface CommandHelp {
  readonly name: string
  readonly description: string
  readonly options: ReadonlyArray<OptionHelp>
  readonly args: ReadonlyArray<ArgumentHelp>
  readonly subcommands: ReadonlyArray<CommandHelp>
}

// The descriptor data of @effect/cli 0.77 (pinned in package.json), read as plain data. An unknown shape throws, so a
// new version that changes it fails the help tests instead of printing a wrong help.
interface Node {
  readonly _tag: string
  readonly [field: string]: any
}

const unknownShape = (what: string, node: Node): never => {
  throw new Error(`help: unknown ${what} ${node._tag} (was @effect/cli upgraded?)`)
}

const spanText = (span: Span.Span): string => {
  switch (span._tag) {
    case "Text":
    case "URI":
      return span.value
    case "Sequence":
      return spanText(span.left) + spanText(span.right)
    case "Weak":
    case "Strong":
    case "Highlight":
      return spanText(span.value)
  }
}

const docText = (doc: HelpDoc.HelpDoc): string => {
  switch (doc._tag) {
    case "Empty":
      return ""
    case "Header":
    case "Paragraph":
      return spanText(doc.value)
    case "Sequence":
      return [docText(doc.left), docText(doc.right)].filter((text) => text !== "").join(" ")
    case "DescriptionList":
      return doc.definitions.map(([term, body]) => `${spanText(term)}: ${docText(body)}`).join(" ")
    case "Enumeration":
      return doc.elements.map(docText).join(" ")
  }
}

const flagOf = (name: string): string => (name.length === 1 ? `-${name}` : `--${name}`)

const placeholderOf = (name: string, primitive: Node, pseudoName: { _tag: string; value?: string }): string => {
  if (pseudoName._tag === "Some") return pseudoName.value!
  switch (primitive._tag) {
    case "Integer":
      return "N"
    case "Float":
      return "NUMBER"
    case "DateTime":
      return "DATE"
    case "Path":
      return primitive.pathType === "file" ? "FILE" : primitive.pathType === "directory" ? "DIR" : "PATH"
    case "Choice": {
      const choices = (primitive.alternatives as ReadonlyArray<[string, unknown]>).map(([choice]) => choice).join("|")
      return choices.length <= 24 ? choices : name.split("-").pop()!.toUpperCase()
    }
    case "Text":
    case "Secret":
      // The last word of the name: `--database-url URL`, `--error-class CLASS`.
      return name.split("-").pop()!.toUpperCase()
    default:
      return unknownShape("value type", primitive)
  }
}

const choicesNote = (primitive: Node): string => {
  if (primitive._tag !== "Choice") return ""
  const choices = (primitive.alternatives as ReadonlyArray<[string, unknown]>).map(([choice]) => choice)
  return choices.join("|").length <= 24 ? "" : `one of ${choices.join(", ")}`
}

/** A default as a person would type it; `undefined` for none (an absent optional value, an empty list). */
const shownDefault = (value: unknown): string | undefined => {
  if (value === undefined || value === null) return undefined
  if (typeof value === "object" && "_tag" in value) {
    const option = value as { _tag: string; value?: unknown }
    if (option._tag === "None") return undefined
    if (option._tag === "Some") return shownDefault(option.value)
  }
  if (Array.isArray(value)) return value.length === 0 ? undefined : value.map(String).join(", ")
  return String(value)
}

interface Modifiers {
  readonly optional: boolean
  readonly repeatable: boolean
  readonly defaultValue: string | undefined
  readonly env: string | undefined
}

const plain: Modifiers = { optional: false, repeatable: false, defaultValue: undefined, env: undefined }

const optionsOf = (node: Node, mods: Modifiers): ReadonlyArray<OptionHelp> => {
  switch (node._tag) {
    case "Empty":
      return []
    case "Single": {
      const isFlag = node.primitiveType._tag === "Bool"
      const note = choicesNote(node.primitiveType)
      return [
        {
          names: [node.fullName as string, ...(node.aliases as ReadonlyArray<string>).map(flagOf)],
          value: isFlag ? undefined : placeholderOf(node.name, node.primitiveType, node.pseudoName),
          description: [docText(node.description), note].filter((text) => text !== "").join("; "),
          required: !mods.optional,
          repeatable: mods.repeatable,
          // A flag's default is its absence: "default false" says nothing.
          defaultValue: isFlag ? undefined : mods.defaultValue,
          env: mods.env
        }
      ]
    }
    case "Map":
      return optionsOf(node.options, mods)
    case "Both":
      return [...optionsOf(node.left, mods), ...optionsOf(node.right, mods)]
    case "OrElse": {
      // `--user-waiting | --no-user-waiting`: one row with every spelling.
      const alternatives = [...optionsOf(node.left, mods), ...optionsOf(node.right, mods)]
      const first = alternatives[0]!
      return [
        {
          ...first,
          names: alternatives.flatMap((row) => row.names),
          description: alternatives.find((row) => row.description !== "")?.description ?? ""
        }
      ]
    }
    case "WithDefault":
      return optionsOf(node.options, {
        ...mods,
        optional: true,
        defaultValue: mods.defaultValue ?? shownDefault(node.fallback)
      })
    case "WithFallback": {
      const config = node.effect as Node
      return optionsOf(node.options, { ...mods, env: config._tag === "Nested" ? String(config.name) : mods.env })
    }
    case "Variadic": {
      const min = node.min._tag === "Some" ? (node.min.value as number) : 0
      return optionsOf(node.argumentOption, { ...mods, repeatable: true, optional: mods.optional || min === 0 })
    }
    case "KeyValueMap":
      return optionsOf(node.argumentOption, { ...mods, repeatable: true })
    default:
      return unknownShape("option", node)
  }
}

const argsOf = (node: Node, mods: Modifiers): ReadonlyArray<ArgumentHelp> => {
  switch (node._tag) {
    case "Empty":
      return []
    case "Single":
      return [
        {
          name: node.name as string,
          description: docText(node.description),
          required: !mods.optional,
          repeatable: mods.repeatable,
          defaultValue: mods.defaultValue
        }
      ]
    case "Map":
      return argsOf(node.args, mods)
    case "Both":
      return [...argsOf(node.left, mods), ...argsOf(node.right, mods)]
    case "Variadic": {
      const min = node.min._tag === "Some" ? (node.min.value as number) : 0
      return argsOf(node.args, { ...mods, repeatable: true, optional: mods.optional || min === 0 })
    }
    case "WithDefault":
      return argsOf(node.args, { ...mods, optional: true, defaultValue: shownDefault(node.fallback) })
    case "WithFallbackConfig":
      return argsOf(node.args, { ...mods, optional: true })
    default:
      return unknownShape("argument", node)
  }
}

const describeNode = (node: Node): CommandHelp => {
  switch (node._tag) {
    case "Standard":
      return {
        name: node.name,
        description: docText(node.description),
        options: optionsOf(node.options, plain),
        args: argsOf(node.args, plain),
        subcommands: []
      }
    case "GetUserInput":
      return { name: node.name, description: docText(node.description), options: [], args: [], subcommands: [] }
    case "Map":
      return describeNode(node.command)
    case "Subcommands":
      return { ...describeNode(node.parent), subcommands: (node.children as ReadonlyArray<Node>).map(describeNode) }
    default:
      return unknownShape("command", node)
  }
}

/**
 * What help shows of a command and everything below it.
 *
 * @since 0.3.0
 * @category constructors
 */
export const describe = (command: Command.Command<any, any, any, any>): CommandHelp =>
  describeNode(command.descriptor as unknown as Node)

/**
 * The commands named by the leading words of `args`, from the root down (the root alone when the first word names
 * no subcommand). Options before a subcommand's name end the walk.
 *
 * @since 0.3.0
 * @category combinators
 */
export const pathOf = (root: CommandHelp, args: ReadonlyArray<string>): ReadonlyArray<CommandHelp> => {
  const path = [root]
  for (const word of args) {
    const next = path[path.length - 1]!.subcommands.find((sub) => sub.name === word)
    if (next === undefined) break
    path.push(next)
  }
  return path
}

/** `text` cut into lines of at most `width` characters at spaces (a longer word gets a line of its own). */
const wrap = (text: string, width: number): ReadonlyArray<string> => {
  const lines: Array<string> = []
  let line = ""
  for (const word of text.split(/\s+/).filter((w) => w !== "")) {
    if (line === "") line = word
    else if (line.length + 1 + word.length <= width) line = `${line} ${word}`
    else {
      lines.push(line)
      line = word
    }
  }
  if (line !== "") lines.push(line)
  return lines.length === 0 ? [""] : lines
}

/** Rows of a term and its description: the terms in one column, the descriptions wrapped beside them. */
const table = (rows: ReadonlyArray<readonly [string, string]>, width: number): ReadonlyArray<string> => {
  const indent = 2
  // A very long term (a flag with a long value name) does not push every description to the right: its description
  // starts on the next line instead.
  const cap = Math.max(12, Math.floor(width * 0.35))
  const column = Math.max(0, ...rows.map(([term]) => term.length).filter((length) => length <= cap)) + indent + 2
  const out: Array<string> = []
  for (const [term, description] of rows) {
    const lines = wrap(description, Math.max(20, width - column))
    const head = `${" ".repeat(indent)}${term}`
    if (head.length + 2 <= column) {
      out.push(`${head.padEnd(column)}${lines[0]}`.trimEnd())
    } else {
      out.push(head)
      out.push(`${" ".repeat(column)}${lines[0]}`.trimEnd())
    }
    for (const line of lines.slice(1)) out.push(`${" ".repeat(column)}${line}`)
  }
  return out
}

const optionTerm = (option: OptionHelp): string =>
  `${[...option.names].sort((a, b) => (a.startsWith("--") ? 1 : 0) - (b.startsWith("--") ? 1 : 0)).join(", ")}${
    option.value === undefined ? "" : ` ${option.value}`
  }`

const optionText = (option: OptionHelp): string => {
  const notes = [
    option.required ? "required" : undefined,
    option.repeatable ? "repeatable" : undefined,
    option.defaultValue === undefined ? undefined : `default ${option.defaultValue}`,
    option.env === undefined ? undefined : `env ${option.env}`
  ].filter((note) => note !== undefined)
  return notes.length === 0 ? option.description : `${option.description} (${notes.join("; ")})`
}

const argumentText = (arg: ArgumentHelp): string => {
  const notes = [
    arg.required ? undefined : "optional",
    arg.repeatable ? "repeatable" : undefined,
    arg.defaultValue === undefined ? undefined : `default ${arg.defaultValue}`
  ].filter((note) => note !== undefined)
  return notes.length === 0 ? arg.description : `${arg.description} (${notes.join("; ")})`
}

/** The usage line: required options spelled out, the rest as `[options]`, then the arguments. */
const usage = (words: ReadonlyArray<string>, command: CommandHelp): string => {
  const required = command.options
    .filter((option) => option.required)
    .map(
      (option) =>
        `${option.names[0]}${option.value === undefined ? "" : ` ${option.value}`}${option.repeatable ? "..." : ""}`
    )
  const args = command.args.map((arg) => {
    const name = `${arg.name}${arg.repeatable ? "..." : ""}`
    return arg.required ? name : `[${name}]`
  })
  return [...words, ...(command.subcommands.length > 0 ? ["<command>"] : []), ...required, "[options]", ...args].join(
    " "
  )
}

/**
 * The options every command takes: the built-ins of `@effect/cli`, less its wizard (see `run`). `--version`,
 * `--completions` and `--log-level` are shown on the root command only, where they make sense.
 *
 * @since 0.3.0
 * @category models
 */
export const builtIns = (root: boolean): ReadonlyArray<OptionHelp> => {
  const option = (names: ReadonlyArray<string>, value: string | undefined, description: string): OptionHelp => ({
    names,
    value,
    description,
    required: false,
    repeatable: false,
    defaultValue: undefined,
    env: undefined
  })
  return [
    ...(root
      ? [
          option(["--version"], undefined, "print the version and exit"),
          option(["--completions"], "SHELL", "print a completion script for sh, bash, fish or zsh and exit"),
          option(
            ["--log-level"],
            "LEVEL",
            "the least severe log lines printed: all, trace, debug, info, warning, error, fatal or none " +
              "(default info); works after any command"
          )
        ]
      : []),
    option(["-h", "--help"], undefined, "show this help and exit")
  ]
}

/**
 * The help of the last command of `path` (from `pathOf`), wrapped to `width` columns: what it does, its usage line,
 * its subcommands, arguments and options with their defaults and environment variables.
 *
 * @since 0.3.0
 * @category combinators
 */
export const render = (
  path: ReadonlyArray<CommandHelp>,
  options: { readonly name: string; readonly version: string; readonly width: number }
): string => {
  const command = path[path.length - 1]!
  const words = [...(path[0]!.name === options.name ? [] : [options.name]), ...path.map((c) => c.name)]
  const isRoot = path.length === 1 && path[0]!.name === options.name
  const width = options.width
  const title = isRoot ? `${options.name} ${options.version}` : words.join(" ")
  const out: Array<string> = [...wrap(`${title}: ${command.description}`, width), ""]
  out.push(...wrap(`Usage: ${usage(words, command)}`, width).map((line, i) => (i === 0 ? line : `    ${line}`)))
  if (command.subcommands.length > 0) {
    out.push("", "Commands:")
    out.push(
      ...table(
        // The first sentence of each: the rest is on the command's own help.
        command.subcommands.map((sub) => [sub.name, sub.description.split(". ")[0]!] as const),
        width
      )
    )
  }
  if (command.args.length > 0) {
    out.push("", "Arguments:")
    out.push(
      ...table(
        command.args.map((arg) => [arg.name, argumentText(arg)] as const),
        width
      )
    )
  }
  out.push("", "Options:")
  out.push(
    ...table(
      [...command.options, ...builtIns(isRoot)].map((option) => [optionTerm(option), optionText(option)] as const),
      width
    )
  )
  if (command.subcommands.length > 0) {
    out.push("", ...wrap(`Run \`${words.join(" ")} <command> --help\` for the options of a command.`, width))
  }
  return out.join("\n")
}

/**
 * Runs `command` as `Command.run` does, with this module's help: `--help` or `-h` anywhere before `--` prints the help
 * of the command its leading words name, and so does a command that only groups subcommands when none is given.
 * `--wizard` is refused as an unknown option: the wizard of `@effect/cli` prompts with its generic texts and is not
 * part of this command line.
 *
 * @since 0.3.0
 * @category constructors
 */
export const run = <Name extends string, R, E, A>(
  command: Command.Command<Name, R, E, A>,
  config: {
    readonly name: string
    readonly version: string
    /** Columns to wrap help at, asked when help is printed. */
    readonly width: () => number
  }
): ((
  argv: ReadonlyArray<string>
) => Effect.Effect<void, E | ValidationError.ValidationError, R | CliApp.CliApp.Environment>) => {
  const cli = Command.run(command, { name: config.name, version: config.version })
  const tree = describe(command)
  return (argv) =>
    Effect.suspend(() => {
      const args = argv.slice(2)
      const end = args.indexOf("--")
      const flags = end < 0 ? args : args.slice(0, end)
      if (flags.includes("--wizard")) {
        return Effect.fail(ValidationError.invalidArgument(HelpDoc.p("Unknown option --wizard (see --help)")))
      }
      const path = pathOf(tree, args)
      const groupAlone = path[path.length - 1]!.subcommands.length > 0 && args.length === path.length - 1
      if (flags.includes("--help") || flags.includes("-h") || groupAlone) {
        return Console.log(render(path, { name: config.name, version: config.version, width: config.width() }))
      }
      return cli(argv)
    })
}

/**
 * The columns help wraps at: the terminal's width on a terminal (at most 100, a comfortable line to read), 80 when
 * the output is a file or a pipe.
 *
 * @since 0.3.0
 * @category combinators
 */
export const terminalWidth = (stream: {
  readonly isTTY?: boolean | undefined
  readonly columns?: number | undefined
}) =>
  stream.isTTY === true && stream.columns !== undefined && stream.columns > 0
    ? Math.max(40, Math.min(100, stream.columns))
    : 80
