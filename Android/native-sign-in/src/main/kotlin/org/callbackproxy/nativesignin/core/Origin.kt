package org.callbackproxy.nativesignin.core

/**
 * The origin of the site the WebView shows: `scheme://host[:port]`, the scheme lower-cased, the
 * host as written, user info, path, query and fragment dropped. The callback and the hand-back's
 * links are judged against it.
 */
class Origin private constructor(val scheme: String, val host: String, val port: Int?) {
    /** `https://site.example:8443`, the port only when one was written. */
    val text: String get() = "$scheme://$host" + (if (port != null) ":$port" else "")

    /** Same scheme, host (case-insensitively) and effective port. */
    fun contains(url: String): Boolean {
        val parts = UrlParts.parse(url) ?: return false
        val scheme = parts.scheme?.let { Ascii.lower(it) } ?: return false
        val host = parts.host ?: return false
        return scheme == this.scheme && Ascii.lower(host) == Ascii.lower(this.host) &&
            effectivePort(scheme, parts.port) == effectivePort(this.scheme, port)
    }

    companion object {
        /** Throws [NativeSignInError.Kind.INITIAL_URL] for anything but an http(s) URL with a host. */
        fun of(url: String): Origin {
            val parts = UrlParts.parse(url)
            val scheme = parts?.scheme?.let { Ascii.lower(it) }
            val host = parts?.host
            if (parts == null || (scheme != "https" && scheme != "http") || host == null || host.isEmpty()) {
                throw NativeSignInError(NativeSignInError.Kind.INITIAL_URL, null, "initialURL",
                    "the callback needs an http(s) URL with a host: $url")
            }
            return Origin(scheme, host, parts.port)
        }

        private fun effectivePort(scheme: String, port: Int?): Int = port ?: if (scheme == "https") 443 else 80

        /** A path as `URLComponents.path =` writes it: RFC 3986 pchar and `/` kept, the rest escaped. */
        internal fun escapePath(path: String): String {
            val out = StringBuilder()
            for (b in path.toByteArray(Charsets.UTF_8)) {
                val byte = b.toInt() and 0xFF
                val c = '\u0000' + byte
                if (Ascii.isUnreserved(byte) || (byte < 0x80 && c in PATH_KEPT)) {
                    out.append(c)
                } else {
                    out.append('%').append(HEX[byte shr 4]).append(HEX[byte and 0x0F])
                }
            }
            return out.toString()
        }

        private val HEX = "0123456789ABCDEF".toCharArray()
        private const val PATH_KEPT = "/!$&'()*+,;=:@"
    }
}
