package org.callbackproxy.nativesignin.core

/**
 * What the platform hands back for one browser launch, and nothing else: an activity result that
 * reaches an activity recreated since the launch, or a process started again, carries no number
 * of ours. On Android the glue reads it from AppAuth's result intent: [result] from its data (the
 * redirect) or `AuthorizationException.fromIntent`, [request] from
 * `AuthorizationResponse.fromIntent(intent)?.request` (AppAuth keeps the request, with the PKCE
 * verifier, across recreation and process death and returns it with a response it accepted).
 */
class LaunchResult(val result: BrowserResult, val request: ReturnedRequest? = null) {
    /**
     * The launch's identity: the state sent (AppAuth's request), else the redirect's one `state`.
     * Null for an ending without a redirect — a cancel, or the activity finished from outside —
     * which the platform returns without any state.
     */
    val state: String?
        get() {
            request?.state?.let { return it }
            val redirect = result as? BrowserResult.Redirect ?: return null
            val states = QueryString.fields(UrlParts.parse(redirect.url)?.query).filter { it.name == "state" }
            return states.singleOrNull()?.value?.takeIf { it.isNotEmpty() }
        }

    override fun toString() = "LaunchResult($result, $request)"
}

/**
 * The request a launch sent, as the platform returns it (AppAuth's `AuthorizationRequest`:
 * `state`, `clientId`, `redirectUri`, `codeVerifier`). The verifier lives here and in the
 * platform's own saved state only: the app's saved state never holds it.
 */
class ReturnedRequest(val state: String?, val clientId: String, val redirectUri: String, val codeVerifier: String?) {
    override fun toString() = "ReturnedRequest($state, $clientId, $redirectUri)"   // the verifier is a secret
}
