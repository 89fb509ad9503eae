package org.callbackproxy.nativesignin.core

/**
 * What a browser result means for the site: a [code] to hand back, or an `error=` word. [cause]
 * tells the flow which outcome it is (the word alone cannot: a provider's own `access_denied` and
 * the user closing the browser are both `access_denied`).
 */
class CallbackOutcome private constructor(val code: String?, val error: String?, val cause: Cause) {
    enum class Cause {
        COMPLETED,
        /** The user closed the browser. */
        USER_CANCELLED,
        /** The provider redirected with `error=`; [error] is its word, or `sign_in_failed`. */
        PROVIDER_ERROR,
        STATE_MISMATCH,
        INVALID_RESPONSE,
        BROWSER_FAILED
    }

    override fun equals(other: Any?) = other is CallbackOutcome && other.code == code && other.error == error && other.cause == cause
    override fun hashCode() = (code ?: error ?: "").hashCode() * 31 + cause.hashCode()
    override fun toString() = if (code != null) "Code" else "Error($error, $cause)"

    companion object {
        fun code(code: String) = CallbackOutcome(code, null, Cause.COMPLETED)
        fun error(word: String, cause: Cause) = CallbackOutcome(null, word, cause)

        /**
         * A redirect's raw query read against the state sent (native and hand-back alike). Any
         * parameter given twice — even one the core ignores (`authuser=0&authuser=1`) — makes the
         * whole response invalid: which copy a reader takes differs between stacks, and a response
         * that parses two ways is not one to hand a code from.
         */
        fun ofRedirectQuery(query: String?, state: String): CallbackOutcome {
            val invalid = error(CallbackError.INVALID_RESPONSE, Cause.INVALID_RESPONSE)
            val seen = HashSet<String>()
            val values = HashMap<String, String>()
            for (field in QueryString.fields(query)) {
                if (!seen.add(field.name)) return invalid
                if (field.name == "code" || field.name == "state" || field.name == "error") {
                    values[field.name] = field.value ?: return invalid
                }
            }
            val error = values["error"]
            if (error != null) {
                val returned = values["state"]
                if (returned != null && returned != state) return error(CallbackError.STATE_MISMATCH, Cause.STATE_MISMATCH)
                return error(if (CallbackError.isPlainOAuthWord(error)) error else CallbackError.SIGN_IN_FAILED, Cause.PROVIDER_ERROR)
            }
            val code = values["code"]
            if (code == null || code.isEmpty()) return invalid
            if (values["state"] != state) return error(CallbackError.STATE_MISMATCH, Cause.STATE_MISMATCH)
            return code(code)
        }
    }
}

/**
 * The `error=` values the core produces itself. The proxy passes the OAuth ones (`access_denied`)
 * to the site's callback as they are and every other word as `sign_in_failed`; ours are distinct so
 * that the proxy's log tells the causes apart.
 */
object CallbackError {
    /** The user closed the browser (RFC 6749's word for "the user said no"). */
    const val CANCELLED = "access_denied"
    /** The redirect's state is not the one sent: the response belongs to another request. */
    const val STATE_MISMATCH = "state_mismatch"
    /** A redirect with neither code nor error, a parameter twice, a foreign redirect. */
    const val INVALID_RESPONSE = "invalid_response"
    /** The browser session failed, or the provider's error was not a plain OAuth word. */
    const val SIGN_IN_FAILED = "sign_in_failed"

    /**
     * RFC 6749's error codes are lower-case words joined by `_`. Anything else (free text, a
     * script, a URL) is not passed to the site, whose failure page may show it.
     */
    fun isPlainOAuthWord(error: String): Boolean =
        error.length in 1..64 && error.all { it in 'a'..'z' || it in '0'..'9' || it == '_' }
}
