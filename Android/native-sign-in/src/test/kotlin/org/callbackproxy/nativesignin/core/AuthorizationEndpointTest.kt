package org.callbackproxy.nativesignin.core

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

class AuthorizationEndpointTest {
    @Test
    fun anOidcEndpointMustBeAnHttpsUrlWithAHostAndNoUserInfo() {
        for (url in listOf("http://login.example.com/auth", "ftp://login.example.com/auth", "https://u@login.example.com/auth",
            "https:///auth", "/auth", "https://h:bad/auth")) {
            val error = assertThrows(NativeSignInError::class.java) { AuthorizationEndpoint.at(url) }
            assertEquals("authorization_endpoint", error.key)
        }
    }

    @Test
    fun anOidcEndpointOnTheDefaultPortMatchesWithOrWithoutThePort() {
        val endpoint = AuthorizationEndpoint.at("https://login.example.com:443/auth")
        assertTrue(endpoint.matches("https://login.example.com/auth"))
        assertTrue(endpoint.matches("https://LOGIN.example.com:443/auth?x=1"))
        assertFalse(endpoint.matches("https://login.example.com/Auth"))
        assertTrue(AuthorizationEndpoint.at("https://login.example.com").matches("https://login.example.com/?state=s"))
    }

    @Test
    fun signInWithAppleCannotBeANativeProviderUnderAnyName() {
        for (name in listOf("apple", "siwa")) {
            val error = assertThrows(NativeSignInError::class.java) {
                Provider.oidc(name, "https://appleid.apple.com/auth/authorize", "com.example.app.signin", "com.example.app:/apple")
            }
            assertEquals(name, error.key)
            assertTrue(error.detail.startsWith("Sign in with Apple (appleid.apple.com) is not intercepted natively"))
        }
        // Apple's URLs are then simply not intercepted: the site's web flow runs in the WebView.
        val interceptor = SignInInterceptor(Vectors.providers, Platform.ANDROID)
        assertTrue(interceptor.decide(Navigation("https://appleid.apple.com/auth/authorize?state=s", Navigation.Target.MAIN_FRAME))
            is NavigationDecision.Allow)
    }

    @Test
    fun aProviderNameTheProxyWouldRefuseAndARedirectWithoutSchemeAreErrors() {
        for (name in listOf("", "has space", "a/b", "a~b", "p".repeat(65))) {
            assertEquals("name", assertThrows(NativeSignInError::class.java) {
                Provider.oidc(name, "https://login.example.com/auth", "c", "com.example.app:/cb")
            }.key)
        }
        assertEquals("redirect_uri", assertThrows(NativeSignInError::class.java) {
            Provider.oidc("corp", "https://login.example.com/auth", "c", "/relative")
        }.key)
        assertEquals("client_id", assertThrows(NativeSignInError::class.java) {
            Provider.oidc("corp", "https://login.example.com/auth", "", "com.example.app:/cb")
        }.key)
    }
}
