package org.callbackproxy.nativesignin.core

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

class SignInInterceptorTest {
    private val site = "https://accounts.google.com/o/oauth2/v2/auth?client_id=web&redirect_uri=https%3A%2F%2Fsite.example%2Fcb" +
        "&state=s&scope=openid+email&nonce=n&response_mode=form_post&request_uri=https%3A%2F%2Fevil.test&claims=%7B%7D#f"

    private fun start(url: String, interceptor: SignInInterceptor = SignInInterceptor(Vectors.providers, Platform.ANDROID)) =
        (interceptor.decide(Navigation(url, Navigation.Target.MAIN_FRAME)) as NavigationDecision.StartNativeSignIn).request

    @Test
    fun everyParameterOutsideTheAllowlistIsDroppedAndTheEndpointHasNoQueryForAppAuth() {
        val request = start(site)
        assertEquals(listOf("client_id", "redirect_uri", "response_type", "scope", "state", "nonce", "code_challenge", "code_challenge_method"),
            request.parameters.map { it.name })
        assertEquals("https://accounts.google.com/o/oauth2/v2/auth", request.endpoint)
        assertFalse(request.url.contains("response_mode") || request.url.contains("request_uri") || request.url.contains('#'))
        assertEquals("openid email", request.parameter("scope"))
        assertEquals("n", request.parameter("nonce"))
        assertNull(request.parameter("prompt"))
        assertEquals(site, request.siteUrl)
    }

    @Test
    fun eachSignInGetsItsOwnVerifierAndTheChallengeSentIsItsS256() {
        val first = start(site)
        val second = start(site)
        assertNotEquals(first.codeVerifier, second.codeVerifier)
        assertEquals(Pkce(first.codeVerifier!!).challenge, first.parameter("code_challenge"))
        assertEquals("S256", first.parameter("code_challenge_method"))
    }

    @Test
    fun aMalformedPercentEscapeInAKeptParameterIsRefused() {
        // Not a shared vector: Foundation's URL(string:) re-encodes it before the Swift library sees
        // it (Contract/README.md), while a WebView hands it over as is.
        val interceptor = SignInInterceptor(Vectors.providers, Platform.ANDROID)
        for ((query, key) in listOf("state=%ZZ" to "state", "state=50%" to "state", "state=s&login_hint=a%2" to "login_hint")) {
            val decision = interceptor.decide(Navigation("https://accounts.google.com/o/oauth2/v2/auth?$query", Navigation.Target.POPUP))
            assertEquals(key, (decision as NavigationDecision.Refuse).error.key, query)
        }
    }

    @Test
    fun theRefusalSaysWhatToFixWithoutTheValues() {
        val interceptor = SignInInterceptor(Vectors.providers, Platform.ANDROID)
        val error = (interceptor.decide(Navigation("https://accounts.google.com/o/oauth2/v2/auth?scope=secret-scope", Navigation.Target.MAIN_FRAME))
            as NavigationDecision.Refuse).error
        assertEquals("state: the site's google authorization URL has no state; a sign-in without one cannot be checked by the site's callback",
            error.toString())
        val twice = (interceptor.decide(Navigation("https://accounts.google.com/o/oauth2/v2/auth?state=secret1&state=secret2",
            Navigation.Target.MAIN_FRAME)) as NavigationDecision.Refuse).error
        assertFalse(twice.toString().contains("secret"))
    }

    @Test
    fun theInterceptorsPlatformAndCallbackPathAreTheRequests() {
        val ios = SignInInterceptor(Vectors.providers, Platform.IOS, "cb")
        assertEquals("/cb", ios.callbackPath)
        val request = start(site, ios)
        assertEquals(Platform.IOS, request.platform)
        assertTrue(request.callbackUrl("https://site.example", BrowserResult.Cancelled).startsWith("https://site.example/cb?provider=google&platform=ios&"))
    }

    @Test
    fun anInterceptorWithoutTheProviderLetsItsUrlThrough() {
        val onlyFacebook = SignInInterceptor(listOf(Provider.facebook("4242")), Platform.ANDROID)
        assertTrue(onlyFacebook.decide(Navigation(site, Navigation.Target.MAIN_FRAME)) is NavigationDecision.Allow)
    }
}
