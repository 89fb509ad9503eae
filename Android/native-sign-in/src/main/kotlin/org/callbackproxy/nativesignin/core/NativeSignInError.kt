package org.callbackproxy.nativesignin.core

/**
 * Why the native sign-in refused something: a configuration it cannot run with, or a navigation
 * it will not turn into a sign-in. The message names what to fix (the BuildConfig key, the missing
 * parameter); it never carries a code, a verifier or a state value.
 *
 * [toString] and [message] read `file: key: detail` (the parts that exist), exactly as the Swift
 * library's `NativeSignInError.description`, because the simulators of both platforms must answer
 * with the same text.
 */
class NativeSignInError(
    val kind: Kind,
    val file: String?,
    val key: String?,
    val detail: String
) : Exception(describe(file, key, detail)) {

    enum class Kind {
        /** BuildConfig values or a provider description: fix the app. */
        CONFIGURATION,
        /** The site's authorization URL cannot be signed in safely (no `state`, …): fix the site. */
        NAVIGATION,
        /** The initial URL the callback would be built on is not an http(s) origin. */
        INITIAL_URL
    }

    override fun toString(): String = describe(file, key, detail)

    companion object {
        fun configuration(key: String?, detail: String, file: String? = null) =
            NativeSignInError(Kind.CONFIGURATION, file, key, detail)

        fun navigation(key: String, detail: String) = NativeSignInError(Kind.NAVIGATION, null, key, detail)

        private fun describe(file: String?, key: String?, detail: String): String = when {
            file != null && key != null -> "$file: $key: $detail"
            file != null -> "$file: $detail"
            key != null -> "$key: $detail"
            else -> detail
        }
    }
}
