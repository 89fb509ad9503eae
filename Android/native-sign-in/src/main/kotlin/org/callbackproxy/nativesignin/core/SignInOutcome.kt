package org.callbackproxy.nativesignin.core

/** How one sign-in ended; exactly one per sign-in. [session] is null when no browser session ran. */
data class SignInOutcome(val session: Int?, val kind: Kind, val reason: String?) {
    enum class Kind(val wireName: String) {
        /** A redirect with the right state and a code: the callback with the code was loaded. */
        COMPLETED("completed"),
        /** The user closed the browser: the callback with `error=access_denied` was loaded. */
        USER_CANCELLED("user_cancelled"),
        /** The provider redirected with `error=` ([reason]: the word passed on). */
        PROVIDER_ERROR("provider_error"),
        /** State mismatch, invalid response, browser failure ([reason] names which). */
        FAILED("failed"),
        /** A provider URL the core refuses ([reason]: the message); nothing was loaded. */
        REFUSED("refused"),
        /** A newer sign-in started while this one ran. */
        SUPERSEDED("superseded"),
        /** The app called cancel(). */
        CANCELLED("cancelled"),
        /** The result arrived after the WebView was released; nothing was loaded. */
        WEBVIEW_GONE("webview_gone"),
        /**
         * A result that found no sign-in (the process was restarted) and carries too little to
         * build the callback ([reason]: [NO_STATE], [UNKNOWN_PROVIDER]); nothing was loaded.
         */
        LOST("lost")
    }

    companion object {
        const val STATE_MISMATCH = "state_mismatch"
        const val INVALID_RESPONSE = "invalid_response"
        const val BROWSER_FAILED = "browser_failed"
        const val BROWSER_DID_NOT_START = "browser_did_not_start"
        /** A code came back for a PKCE provider but its verifier did not: `error=sign_in_failed` was loaded. */
        const val VERIFIER_LOST = "verifier_lost"
        /** [Kind.LOST]: a cancel or a failure, which the platform returns without the state. */
        const val NO_STATE = "no_state"
        /** [Kind.LOST]: neither the returned request nor the redirect names a configured provider. */
        const val UNKNOWN_PROVIDER = "unknown_provider"
    }
}
