package org.callbackproxy.nativesignin.core

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

class CallbackUrlTest {
    private val request = (Vectors.interceptor().decide(Navigation("https://accounts.google.com/o/oauth2/v2/auth?state=s1",
        Navigation.Target.MAIN_FRAME)) as NavigationDecision.StartNativeSignIn).request

    @Test
    fun aFailureNeverCarriesACodeAndAlwaysTheStateSent() {
        for (query in listOf("error=access_denied&state=other&code=c", "code=c&state=s1&code=d", "code=c&state=evil")) {
            val url = request.callbackUrl("https://site.example", BrowserResult.Redirect("com.googleusercontent.apps.123-and:/oauth2redirect?$query"))
            val names = QueryString.fields(UrlParts.parse(url)!!.query).map { it.name }
            assertEquals(listOf("provider", "platform", "client_id", "redirect_uri", "state", "error"), names, query)
            assertTrue(url.contains("&state=s1&"), url)
        }
    }

    @Test
    fun theCallbackPathIsEscapedLikeAPath() {
        val odd = (SignInInterceptor(Vectors.providers, Platform.ANDROID, "/a b/ü;x") { Pkce(Vectors.codeVerifier) }
            .decide(Navigation("https://accounts.google.com/o/oauth2/v2/auth?state=s1", Navigation.Target.MAIN_FRAME))
            as NavigationDecision.StartNativeSignIn).request
        assertTrue(odd.callbackUrl("https://site.example", BrowserResult.Cancelled).startsWith("https://site.example/a%20b/%C3%BC;x?"))
    }

    @Test
    fun anIpv6OriginKeepsItsBrackets() {
        assertTrue(request.callbackUrl("http://[::1]:8080/app", BrowserResult.Cancelled).startsWith("http://[::1]:8080/_oauth_callback?"))
    }
}
