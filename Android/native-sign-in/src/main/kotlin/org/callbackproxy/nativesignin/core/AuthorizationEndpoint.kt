package org.callbackproxy.nativesignin.core

/**
 * Recognises a provider's authorization URL: `https`, one of the exact hosts, the default or
 * the given port, one of the exact paths — nothing else.
 *
 * Exactness is the point. A prefix or substring test (`url.startsWith("https://accounts.google.com")`)
 * also matches `https://accounts.google.com.evil.test/`, and a test on the whole string matches
 * `https://evil.test/accounts.google.com` or `https://accounts.google.com@evil.test/` (a user
 * name, not a host). A URL with any user info is never a provider's. Comparison is on the URL as
 * written (percent-encoded): a URL spelled differently from the provider's own is not
 * intercepted, and the WebView then meets the provider's refusal of embedded browsers, which is
 * harmless.
 */
class AuthorizationEndpoint internal constructor(
    val hosts: Set<String>,
    /** Null: the https default, 443. */
    val port: Int?,
    val paths: Set<String>,
    /** Facebook versions its dialog: `/v26.0/dialog/oauth` as well as `/dialog/oauth`. */
    internal val allowsGraphVersion: Boolean
) {
    fun matches(url: String): Boolean {
        val parts = UrlParts.parse(url) ?: return false
        if (parts.scheme == null || Ascii.lower(parts.scheme) != "https" || parts.userInfo != null) return false
        val host = parts.host ?: return false
        if (Ascii.lower(host) !in hosts || (if (parts.port == 443) null else parts.port) != port) return false
        return parts.path in paths || (allowsGraphVersion && droppingGraphVersion(parts.path) in paths)
    }

    override fun equals(other: Any?) = other is AuthorizationEndpoint && other.hosts == hosts &&
        other.port == port && other.paths == paths && other.allowsGraphVersion == allowsGraphVersion

    override fun hashCode() = hosts.hashCode() * 31 + paths.hashCode()
    override fun toString() = "AuthorizationEndpoint($hosts:${port ?: 443}$paths)"

    companion object {
        /**
         * Both paths Google serves: `/o/oauth2/v2/auth` (current) and `/o/oauth2/auth`
         * (omniauth-google-oauth2 and other older clients).
         */
        val GOOGLE = AuthorizationEndpoint(setOf("accounts.google.com"), null,
            setOf("/o/oauth2/v2/auth", "/o/oauth2/auth"), false)
        val FACEBOOK = AuthorizationEndpoint(setOf("www.facebook.com", "m.facebook.com"), null,
            setOf("/dialog/oauth"), true)
        /** Recognised only to be refused as a native provider ([Provider] explains why). */
        val APPLE = AuthorizationEndpoint(setOf("appleid.apple.com"), null, setOf("/auth/authorize"), false)

        /** The endpoint at exactly this URL (an OpenID provider's `authorization_endpoint`). */
        fun at(url: String): AuthorizationEndpoint {
            val parts = UrlParts.parse(url)
            val host = parts?.host
            if (parts == null || parts.scheme == null || Ascii.lower(parts.scheme) != "https" ||
                host == null || host.isEmpty() || parts.userInfo != null) {
                throw NativeSignInError.configuration("authorization_endpoint",
                    "an authorization endpoint is an https URL with a host: $url")
            }
            return AuthorizationEndpoint(setOf(Ascii.lower(host)), if (parts.port == 443) null else parts.port,
                setOf(if (parts.path.isEmpty()) "/" else parts.path), false)
        }

        /** `/v26.0/dialog/oauth` → `/dialog/oauth`; any other path unchanged. */
        private fun droppingGraphVersion(path: String): String {
            if (!path.startsWith("/v")) return path
            val afterV = path.substring(2)
            val slash = afterV.indexOf('/')
            if (slash < 0) return path
            val version = afterV.substring(0, slash).split('.')
            if (version.size != 2 || !version.all { Ascii.isDigits(it) }) return path
            return afterV.substring(slash)
        }
    }
}
