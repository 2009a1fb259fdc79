/**
 * Redaction of secrets in text: what evidence, `lastError`, log lines and every page pass through before anyone can
 * read them. One set of rules, applied in one place (`redact`), so a secret format added here is removed everywhere
 * at once: the Worker's evidence (`Normalize.normalize`), the HTTP views and the dashboard (which re-apply it to
 * whatever a row holds), and the process's log lines (`logger`).
 *
 * What is removed (the shape around it is kept, so evidence stays readable):
 * - credentials in URLs (`scheme://user:password@host`: the password);
 * - PEM private keys (`-----BEGIN ... PRIVATE KEY-----` blocks, also when cut short);
 * - the value of a field or header whose name says it is secret, in JSON, `name=value`, `name: value` and
 *   header-line forms: names ending in `key` (`api_key`, `apiKey`, `x-api-key`, `secret_key`, `key`), `secret`,
 *   `password`, `passwd`, `passphrase`, `token` (`access_token`, `refresh_token`, not `max_tokens`), `auth`,
 *   `authorization`, `credential(s)`, `cookie`, `session` ids, `signature` (`null`, `true` and `false` are kept);
 * - `Bearer`, `Basic` and `Token` credentials;
 * - tokens recognised by their prefix: OpenAI and Anthropic (`sk-`, `sk-ant-`), Stripe (`sk_live_`, `rk_test_`,
 *   `whsec_`, ...), GitHub (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`), GitLab (`glpat-`), Slack
 *   (`xoxb-`, `xoxp-`, `xapp-`, ...), Hugging Face (`hf_`), Groq (`gsk_`), xAI (`xai-`), Replicate (`r8_`),
 *   Perplexity (`pplx-`), Fireworks (`fw_`), npm (`npm_`), PyPI (`pypi-`), SendGrid (`SG.`), DigitalOcean
 *   (`dop_v1_`), Shopify (`shpat_`, ...), Google (`AIza`, OAuth `ya29.`), AWS access key ids (`AKIA`, `ASIA`),
 *   and slowcall's own API tokens (`sct_`);
 * - bare JSON Web Tokens (`eyJ....eyJ....`);
 * - query parameters named like credentials (`?key=`, `&api_key=`, `&sig=`, `&token=`, ...).
 *
 * Invariant: `redact` is idempotent (redacting twice gives what redacting once gave) and never lengthens a secret
 * into something that matches again.
 *
 * @since 0.3.0
 */
import { Logger } from "effect"
import type { Json } from "./Job.js"

/**
 * The text that stands where a secret was.
 *
 * @since 0.3.0
 * @category models
 */
export const marker = "[redacted]"

const urlCredentials = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s:/?#@"'<>]*):([^\s/?#@"'<>]*)@/gi

const privateKey = /-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----[\s\S]*?(?:-----END \1PRIVATE KEY-----|$)/g

/** Header names whose whole value (to the end of the line or field) is a credential. */
const headerLine =
  /((?:proxy-)?authorization|x-api-key|x-goog-api-key|api-key|openai-api-key|anthropic-api-key|x-auth-token|cookie|set-cookie)(["']?\s*[:=]\s*["']?)[^"'\r\n,;}]+/gi

/**
 * A secret field's name: a whole identifier (letters, digits, `_`, `-`, `.`) that ends in a secret word. The text rule
 * (`secretField`) and the JSON rule (`redactJson`) both use it.
 */
const secretNamePattern =
  "[A-Za-z0-9_.-]*?(?:key|secret|password|passwd|passphrase|pwd|token|auth|authorization|credentials?|cookie|session[_-]?id|signature)"

const secretName = new RegExp(`^${secretNamePattern}$`, "i")

/**
 * A field whose name says its value is secret, then its value. The name is a whole identifier (letters, digits,
 * `_`, `-`, `.`) that ends in a secret word, so `access_token`, `apiKey`, `x-api-key` and `db.password` are secret
 * names and `max_tokens` or `author` are not. The name may be quoted (also with escaped quotes, however deep, as in
 * JSON inside a JSON string inside a log line); the value is a quoted string (either quote, or escaped quotes) or a
 * bare word. An escaped string ends only at a quote with exactly its opening's backslashes, so a quote inside the
 * value (more backslashes: `\\\"` one level down) does not end it early and leave the rest of the secret behind.
 */
const secretField = new RegExp(
  `(\\\\*["']?)((?<![A-Za-z0-9_.-])${secretNamePattern})\\1(\\s*[:=]\\s*)((?<esc>\\\\+)"(?:(?!(?<!\\\\)\\k<esc>")[^\\n])*(?<!\\\\)\\k<esc>"|"(?:[^"\\\\\\n]|\\\\.)*"|'(?:[^'\\\\\\n]|\\\\.)*'|[^\\s,;&}"'\\\\]+)`,
  "gi"
)

const schemeCredential = /\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{4,}/gi

/** Prefixed tokens: the prefix is kept, the rest goes. Longer prefixes first (`sk-ant-` before `sk-`). */
const prefixed =
  /\b(sk-ant-|sk-|sct_|(?:sk|rk|pk)_(?:live|test)_|whsec_|gh[pousr]_|github_pat_|glpat-|xox[abposr]-|xapp-|hf_|gsk_|xai-|r8_|pplx-|fw_|npm_|pypi-|dop_v1_|shp(?:at|ss|ca|pa)_|ya29\.)[A-Za-z0-9_-]{6,}/g

const sendGrid = /\bSG\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g
const jwt = /\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g
const googleKey = /\bAIza[0-9A-Za-z_-]{10,}/g
const awsKey = /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g
const queryKey =
  /([?&;](?:key|api[_-]?key|apikey|access[_-]?token|token|auth|sig|signature|password|secret|client_secret|x-goog-api-key)=)[^&#\s"'<>]+/gi

const keptValues = new Set(["null", "true", "false", '""', "''"])

/** The replacement of a secret field's value: the marker in the value's own quoting. */
const fieldValue = (value: string): string => {
  if (keptValues.has(value) || value === marker) return value
  const escaped = /^(\\+)"/.exec(value)
  if (escaped !== null) return `${escaped[1]}"${marker}${escaped[1]}"`
  const quote = value[0]
  return quote === '"' || quote === "'" ? `${quote}${marker}${quote}` : marker
}

/**
 * Removes every secret format of the module header from a string. What remains keeps its shape: field names,
 * header names, token prefixes and URL user names stay, each secret becomes `[redacted]`. Idempotent.
 *
 * @since 0.3.0
 * @category combinators
 */
export const redact = (text: string): string =>
  text
    .replace(
      privateKey,
      (_m, kind: string) => `-----BEGIN ${kind}PRIVATE KEY-----${marker}-----END ${kind}PRIVATE KEY-----`
    )
    .replace(urlCredentials, `$1$2:${marker}@`)
    .replace(headerLine, `$1$2${marker}`)
    .replace(
      secretField,
      (_m, quote: string, name: string, separator: string, value: string) =>
        `${quote}${name}${quote}${separator}${fieldValue(value)}`
    )
    .replace(schemeCredential, `$1 ${marker}`)
    .replace(prefixed, `$1${marker}`)
    .replace(sendGrid, `SG.${marker}`)
    .replace(jwt, `eyJ${marker}`)
    .replace(googleKey, `AIza${marker}`)
    .replace(awsKey, `AKIA${marker}`)
    .replace(queryKey, `$1${marker}`)

/**
 * Removes secrets from a JSON value, keeping it JSON: every string (object keys too) passes `redact`, and the value of
 * a field whose name says it is secret (the names of the text rule: `apiKey`, `access_token`, `password`, ...)
 * becomes `[redacted]` whatever it holds (a number, an object; `null`, `true`, `false` and `""` are kept). Redacting its JSON
 * text with `redact` afterwards changes nothing. Used wherever a job's input is shown.
 *
 * @since 0.5.0
 * @category combinators
 */
export const redactJson = (value: Json): Json => {
  if (typeof value === "string") return redact(value)
  if (value === null || typeof value !== "object") return value
  if (Array.isArray(value)) return value.map(redactJson)
  const out: Record<string, Json> = {}
  for (const [key, field] of Object.entries(value as { readonly [key: string]: Json })) {
    const kept = field === null || typeof field === "boolean" || field === ""
    // Defined, not assigned: a `__proto__` key of parsed JSON stays a plain field.
    Object.defineProperty(out, redact(key), {
      value: secretName.test(key) && !kept ? marker : redactJson(field),
      enumerable: true,
      writable: true,
      configurable: true
    })
  }
  return out
}

/**
 * A logger that formats each entry as logfmt (message, cause, spans and annotations), redacts the whole line and
 * writes it to the console: no secret in a logged error, cause or annotation reaches the log. An application installs
 * it with `layerLogger` (under `NodeRuntime.runMain`, pass `disablePrettyLogger: true`, or the pretty logger it adds
 * writes every line a second time, unredacted), or wraps its own formatting the same way (`Logger.map(format,
 * redact)`), as the `slowcall` executable does.
 *
 * @since 0.3.0
 * @category constructors
 */
export const logger: Logger.Logger<unknown, void> = Logger.logfmtLogger.pipe(Logger.map(redact), Logger.withConsoleLog)

/**
 * The lines `logger` would write, for a test or a sink of its own: the same formatting and redaction, the output
 * handed to `write` instead of the console.
 *
 * @since 0.3.0
 * @category constructors
 */
export const loggerTo = (write: (line: string) => void): Logger.Logger<unknown, void> =>
  Logger.logfmtLogger.pipe(
    Logger.map(redact),
    Logger.map((line) => write(line))
  )

/**
 * Replaces Effect's default logger with `logger` for everything the layer is provided to.
 *
 * @since 0.3.0
 * @category layers
 */
export const layerLogger = Logger.replace(Logger.defaultLogger, logger)
