package org.callbackproxy.nativesignin.core

/** What the WebView should do with a navigation. */
sealed class NavigationDecision {
    /** Not a sign-in: let the WebView load it. */
    object Allow : NavigationDecision() {
        override fun toString() = "Allow"
    }

    /** Cancel the WebView's load and run this request in the browser. */
    class StartNativeSignIn(val request: AuthorizationRequest) : NavigationDecision()

    /**
     * A provider's authorization URL that cannot be signed in safely. Cancel the load (the
     * provider would refuse the WebView anyway) and tell the user; do not sign in.
     */
    class Refuse(val error: NativeSignInError) : NavigationDecision()
}
