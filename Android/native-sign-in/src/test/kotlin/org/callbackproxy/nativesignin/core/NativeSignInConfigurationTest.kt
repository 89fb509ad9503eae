package org.callbackproxy.nativesignin.core

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Test

class NativeSignInConfigurationTest {
    private fun error(values: Map<String, Any?>) =
        assertThrows(NativeSignInError::class.java) { NativeSignInConfiguration.fromBuildConfig(values) }

    @Test
    fun everyErrorNamesBuildConfigAndTheField() {
        val wrongScheme = error(mapOf("OAUTH_ENABLED" to true, "GOOGLE_CLIENT_ID" to "123-and.apps.googleusercontent.com",
            "OAUTH_REDIRECT_SCHEME" to "com.googleusercontent.apps.999-and"))
        assertEquals("BuildConfig: OAUTH_REDIRECT_SCHEME: is \"com.googleusercontent.apps.999-and\", " +
            "but GOOGLE_CLIENT_ID reversed is \"com.googleusercontent.apps.123-and\"", wrongScheme.toString())
        assertEquals("BuildConfig: OAUTH_ENABLED: must be a boolean buildConfigField (true or false), not \"true\"",
            error(mapOf("OAUTH_ENABLED" to "true")).toString())
        assertEquals("BuildConfig", error(mapOf("OAUTH_ENABLED" to true, "FACEBOOK_APP_ID" to 4242)).file)
    }

    @Test
    fun aNullFieldIsNotSetAndOffGivesNoInterceptor() {
        val off = NativeSignInConfiguration.fromBuildConfig(mapOf("OAUTH_ENABLED" to false))
        assertNull(off.interceptor())
        val facebook = NativeSignInConfiguration.fromBuildConfig(mapOf("OAUTH_ENABLED" to true, "GOOGLE_CLIENT_ID" to null,
            "FACEBOOK_APP_ID" to "4242", "OAUTH_REDIRECT_SCHEME" to null))
        assertEquals(listOf(Provider.facebook("4242")), facebook.providers)
        assertEquals(Platform.ANDROID, assertNotNull(facebook.interceptor()).let { facebook.interceptor()!!.platform })
    }

    @Test
    fun theGoogleProviderIsTheAndroidClientWithItsReversedRedirectAndPkce() {
        val google = NativeSignInConfiguration.fromBuildConfig(mapOf("OAUTH_ENABLED" to true,
            "GOOGLE_CLIENT_ID" to "123-and.apps.googleusercontent.com")).providers.single()
        assertEquals("com.googleusercontent.apps.123-and:/oauth2redirect", google.redirectUri)
        assertEquals("com.googleusercontent.apps.123-and", google.callbackScheme)
        assertEquals(AuthorizationEndpoint.GOOGLE, google.endpoint)
        assertEquals(true, google.usesPkce)
    }
}
