package org.callbackproxy.nativesignin.core

/** A load the WebView is about to make, as the platform glue describes it. */
data class Navigation(val url: String, val target: Target) {
    enum class Target(val wireName: String) {
        /** The top-level document: shouldOverrideUrlLoading with `request.isForMainFrame`. */
        MAIN_FRAME("mainFrame"),
        /**
         * A new window (`window.open`, `target=_blank`) the app opens itself: its popup WebView's
         * first navigation (onCreateWindow is given no URL). Sites open sign-in in a popup, and a
         * popup is as much a top-level context as the main frame.
         */
        POPUP("popup"),
        /**
         * An iframe. Never a sign-in: providers refuse to be framed for the authorization page,
         * and what does load in frames (Google One Tap, Facebook plugins) must keep working.
         */
        SUBFRAME("subframe");

        companion object {
            fun fromWireName(name: String): Target? = values().firstOrNull { it.wireName == name }
        }
    }
}

/** The `platform=` value of `/_oauth_callback`; the proxy picks the native client by it. */
enum class Platform(val wireName: String) {
    IOS("ios"),
    ANDROID("android")
}
