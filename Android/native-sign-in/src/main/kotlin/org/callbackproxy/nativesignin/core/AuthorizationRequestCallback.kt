package org.callbackproxy.nativesignin.core

// Building the `/_oauth_callback` URL the WebView loads when the browser returns (the contract:
// docs/reference.md, endpoint `/_oauth_callback`).

/**
 * `<origin of initialUrl><callbackPath>?provider=…&platform=…&client_id=…&redirect_uri=…` then
 * `&code=…&state=…[&code_verifier=…]` on success or `&state=…&error=…` (no code).
 *
 * Only the origin of [initialUrl] is used: the proxy serves `oauth.callback_path` at the root of
 * the site's host, so `https://example.com/app/?utm=x` gives `https://example.com/_oauth_callback?…`.
 * Every value is percent-encoded, leaving only RFC 3986's unreserved characters. `state` is always
 * the one sent, never the one returned.
 */
fun AuthorizationRequest.callbackUrl(initialUrl: String, result: BrowserResult): String =
    callbackUrl(initialUrl, outcome(result))

fun AuthorizationRequest.callbackUrl(initialUrl: String, outcome: CallbackOutcome): String {
    val origin = Origin.of(initialUrl)
    val fields = arrayListOf(
        QueryString.Field("provider", provider),
        QueryString.Field("platform", platform.wireName),
        QueryString.Field("client_id", clientId),
        QueryString.Field("redirect_uri", redirectUri))
    val code = outcome.code
    if (code != null) {
        fields.add(QueryString.Field("code", code))
        fields.add(QueryString.Field("state", state))
        val verifier = codeVerifier
        if (verifier != null) fields.add(QueryString.Field("code_verifier", verifier))
    } else {
        fields.add(QueryString.Field("state", state))
        fields.add(QueryString.Field("error", outcome.error!!))
    }
    return origin.text + Origin.escapePath(callbackPath) + "?" + QueryString.encode(fields)
}

/**
 * A code only when the redirect's `state` equals the one sent; a provider error without a state
 * is passed on (an error signs nobody in, and providers differ in echoing state on errors), one
 * with a different state is `state_mismatch`. A redirect with any parameter twice (even one the
 * core does not read, `authuser=0&authuser=1`) is `invalid_response`: which copy a reader takes
 * differs between stacks, so the redirect is ambiguous as a whole.
 */
fun AuthorizationRequest.outcome(result: BrowserResult): CallbackOutcome {
    val redirect = when (result) {
        is BrowserResult.Cancelled -> return CallbackOutcome.error(CallbackError.CANCELLED, CallbackOutcome.Cause.USER_CANCELLED)
        is BrowserResult.Failed -> return CallbackOutcome.error(CallbackError.SIGN_IN_FAILED, CallbackOutcome.Cause.BROWSER_FAILED)
        is BrowserResult.Redirect -> result.url
    }
    val parts = UrlParts.parse(redirect)
    if (parts == null || !isOurRedirect(parts)) {
        return CallbackOutcome.error(CallbackError.INVALID_RESPONSE, CallbackOutcome.Cause.INVALID_RESPONSE)
    }
    return CallbackOutcome.ofRedirectQuery(parts.query, state)
}

/** Scheme, host and path of the redirect are those of [AuthorizationRequest.redirectUri]. */
private fun AuthorizationRequest.isOurRedirect(parts: UrlParts): Boolean {
    val sent = UrlParts.parse(redirectUri) ?: return false
    return parts.scheme?.let { Ascii.lower(it) } == sent.scheme?.let { Ascii.lower(it) } &&
        parts.host?.let { Ascii.lower(it) } == sent.host?.let { Ascii.lower(it) } &&
        parts.path == sent.path
}
