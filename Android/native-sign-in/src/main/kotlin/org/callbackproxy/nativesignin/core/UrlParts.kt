package org.callbackproxy.nativesignin.core

/**
 * A URL split into its RFC 3986 components as written (still percent-encoded), the way the
 * Swift library reads URLs with `URLComponents`' `percentEncoded…` properties.
 *
 * Not `java.net.URI`: it rejects characters WebViews leave raw in queries (`{`, `|`, `^`; the
 * WHATWG URL standard does not escape them there), and it silently turns a host it cannot parse
 * into a "registry" authority with a null host. Not `android.net.Uri`: the core must run on the
 * JVM. The split is RFC 3986 Appendix B's; on top of it the authority is cut into user info
 * (everything before the last `@`, as browsers do), host and port.
 *
 * [parse] returns null for what no browser hands over: control characters, spaces, non-ASCII
 * (Chromium escapes them all), a backslash in the authority (browsers read it as `/`, so
 * `https://evil.test\@accounts.google.com` means evil.test), a port that is not a number.
 */
internal class UrlParts private constructor(
    /** As written; compare with [Ascii.lower]. */
    val scheme: String?,
    /** Null when the URL has no `//` authority (`com.example.app:/oauth2redirect`). */
    val authority: String?,
    /** Null without `@`; `""` for `https://@host/`. */
    val userInfo: String?,
    /** As written (percent-encoded; IPv6 with its brackets); null without an authority. */
    val host: String?,
    /** Null when absent or empty (the scheme's default). */
    val port: Int?,
    val path: String,
    val query: String?,
    val fragment: String?
) {
    /** Scheme, authority and path as written: the URL without its query and fragment. */
    val withoutQuery: String
        get() = (if (scheme != null) "$scheme:" else "") + (if (authority != null) "//$authority" else "") + path

    companion object {
        fun parse(text: String): UrlParts? {
            if (text.any { it <= ' ' || it > '~' }) return null
            var rest = text
            var scheme: String? = null
            val colon = rest.indexOf(':')
            val firstDelimiter = rest.indexOfFirst { it == '/' || it == '?' || it == '#' }
            if (colon > 0 && (firstDelimiter < 0 || colon < firstDelimiter) && isScheme(rest.substring(0, colon))) {
                scheme = rest.substring(0, colon)
                rest = rest.substring(colon + 1)
            }
            var fragment: String? = null
            val hash = rest.indexOf('#')
            if (hash >= 0) {
                fragment = rest.substring(hash + 1)
                rest = rest.substring(0, hash)
            }
            var query: String? = null
            val question = rest.indexOf('?')
            if (question >= 0) {
                query = rest.substring(question + 1)
                rest = rest.substring(0, question)
            }
            var authority: String? = null
            if (rest.startsWith("//")) {
                val slash = rest.indexOf('/', 2)
                authority = if (slash < 0) rest.substring(2) else rest.substring(2, slash)
                rest = if (slash < 0) "" else rest.substring(slash)
            }
            if (authority == null) return UrlParts(scheme, null, null, null, null, rest, query, fragment)
            if (authority.contains('\\')) return null

            val at = authority.lastIndexOf('@')
            val userInfo = if (at >= 0) authority.substring(0, at) else null
            val hostPort = if (at >= 0) authority.substring(at + 1) else authority
            val host: String
            val portText: String?
            if (hostPort.startsWith("[")) {
                val close = hostPort.indexOf(']')
                if (close < 0) return null
                host = hostPort.substring(0, close + 1)
                val after = hostPort.substring(close + 1)
                if (after.isNotEmpty() && !after.startsWith(":")) return null
                portText = if (after.isEmpty()) null else after.substring(1)
            } else {
                val portColon = hostPort.indexOf(':')
                host = if (portColon < 0) hostPort else hostPort.substring(0, portColon)
                portText = if (portColon < 0) null else hostPort.substring(portColon + 1)
            }
            var port: Int? = null
            if (portText != null && portText.isNotEmpty()) {
                if (!Ascii.isDigits(portText) || portText.length > 5) return null
                port = portText.toInt()
                if (port > 65535) return null
            }
            return UrlParts(scheme, authority, userInfo, host, port, rest, query, fragment)
        }

        /** RFC 3986 §3.1: `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`. */
        fun isScheme(text: String): Boolean =
            text.isNotEmpty() && (text[0] in 'a'..'z' || text[0] in 'A'..'Z') &&
                text.all { it in 'a'..'z' || it in 'A'..'Z' || it in '0'..'9' || it == '+' || it == '-' || it == '.' }
    }
}
