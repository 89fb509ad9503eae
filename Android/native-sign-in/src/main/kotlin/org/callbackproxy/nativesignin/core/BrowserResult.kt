package org.callbackproxy.nativesignin.core

/** How the browser part of a sign-in ended, as the platform glue saw it. */
sealed class BrowserResult {
    /**
     * The redirect to the native client's redirect URI, as received: AppAuth puts it in the
     * result Intent's data (`AuthorizationManagementActivity` calls `setData(responseUri)` for
     * successes, provider errors and state mismatches alike), so the core, not AppAuth, decides.
     */
    data class Redirect(val url: String) : BrowserResult()

    /** The user closed the browser (AppAuth: `GeneralErrors.USER_CANCELED_AUTH_FLOW`). */
    object Cancelled : BrowserResult() {
        override fun toString() = "Cancelled"
    }

    /** The session ended otherwise (no browser, AppAuth returned no result); [reason] is for logs. */
    data class Failed(val reason: String) : BrowserResult()
}
