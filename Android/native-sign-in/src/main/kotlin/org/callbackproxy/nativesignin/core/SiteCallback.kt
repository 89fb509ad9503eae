package org.callbackproxy.nativesignin.core

/**
 * An http(s) origin as the hand-back compares them: scheme and host lower-cased, the scheme's
 * default port as null. Null from [of] for anything but an http(s) URL with a host and no user info.
 */
data class SiteOrigin(val scheme: String, val host: String, val port: Int?) {
    companion object {
        fun of(url: String): SiteOrigin? = UrlParts.parse(url)?.let { of(it) }

        internal fun of(parts: UrlParts): SiteOrigin? {
            val scheme = parts.scheme?.let { Ascii.lower(it) } ?: return null
            val host = parts.host
            if ((scheme != "https" && scheme != "http") || host == null || host.isEmpty() || parts.userInfo != null) return null
            val defaultPort = if (scheme == "https") 443 else 80
            return SiteOrigin(scheme, Ascii.lower(host), if (parts.port == defaultPort) null else parts.port)
        }
    }
}

/**
 * The site's own provider callback (the `redirect_uri` of its authorization URL), where a
 * hand-back sign-in returns. It must be on the origin of the WebView's site: the app claims that
 * domain's links, and the site's session cookie (which checks `state`) is there.
 */
class SiteCallback private constructor(val origin: SiteOrigin, /** Percent-encoded, as the provider sends it back. */ val path: String) {
    val host: String get() = origin.host

    /** Whether a redirect the browser caught is this callback. */
    fun isRedirect(url: String): Boolean {
        val parts = UrlParts.parse(url) ?: return false
        return SiteOrigin.of(parts) == origin && parts.path == path
    }

    /** The callback with the sent state and an error word: the site's own failure path. */
    fun url(state: String, error: String): String =
        "${origin.scheme}://${origin.host}" + (if (origin.port != null) ":${origin.port}" else "") + path + "?" +
            QueryString.encode(listOf(QueryString.Field("error", error), QueryString.Field("state", state)))

    companion object {
        /**
         * [linkPaths]: when the result can only come back as an App Link, the callback's path must
         * be one the app claims, or the sign-in could never return. Null: the browser catches the
         * https redirect itself.
         */
        fun of(siteUrl: String, initialUrl: String, linkPaths: Set<String>?): SiteCallback {
            val redirects = QueryString.fields(UrlParts.parse(siteUrl)?.query).filter { it.name == "redirect_uri" }
            val text = if (redirects.size == 1) redirects[0].value else null
            val parts = text?.let { UrlParts.parse(it) }
            val origin = parts?.let { SiteOrigin.of(it) }
            if (parts == null || origin == null || origin != SiteOrigin.of(initialUrl) || parts.path.isEmpty()) {
                throw NativeSignInError.navigation("redirect_uri",
                    "a hand-back sign-in needs one redirect_uri on the site's own origin " +
                        "($initialUrl); the provider's answer could not come back")
            }
            if (linkPaths != null && parts.path !in linkPaths) {
                throw NativeSignInError.configuration("linkPaths",
                    "the site's callback ${parts.path} is not among the app's link paths; " +
                        "the universal link / App Link back would not reach the app")
            }
            return SiteCallback(origin, parts.path)
        }

        /** A native client whose redirect is an https URL waits for it as an https callback. */
        fun httpsCallback(redirectUri: String): BrowserCallback.Https? {
            val parts = UrlParts.parse(redirectUri) ?: return null
            val host = parts.host
            if (parts.scheme == null || Ascii.lower(parts.scheme) != "https" || host == null || host.isEmpty()) return null
            return BrowserCallback.Https(Ascii.lower(host), if (parts.path.isEmpty()) "/" else parts.path)
        }
    }
}
