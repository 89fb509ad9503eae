package org.callbackproxy.nativesignin.core

import org.callbackproxy.nativesignin.core.Vectors.obj
import org.callbackproxy.nativesignin.core.Vectors.objects
import org.callbackproxy.nativesignin.core.Vectors.optionalString
import org.callbackproxy.nativesignin.core.Vectors.string
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Assertions.fail
import org.junit.jupiter.api.DynamicTest
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestFactory

/** Every case of Contract/native-sign-in-vectors.json, one dynamic test each. */
class ContractVectorsTest {
    private fun cases(section: String, body: (Map<String, Any?>) -> Unit): List<DynamicTest> =
        Vectors.section(section).mapIndexed { i, c -> DynamicTest.dynamicTest("$section[$i] ${c.string("name")}") { body(c) } }

    @Test
    fun theVectorFileHasEverySectionFilled() {
        for (section in listOf("interception", "native_request", "state", "callback_url", "error_mapping")) {
            assertTrue(Vectors.section(section).size >= 5, section)
        }
        assertTrue(Vectors.document.obj("configuration").objects("android").size >= 10)
        assertEquals(Pkce(Vectors.codeVerifier).challenge, Vectors.codeChallenge)
    }

    @TestFactory
    fun interception() = cases("interception") { c ->
        val target = Navigation.Target.fromWireName(c.string("target"))!!
        assertDecision(c.obj("expect"), Vectors.interceptor().decide(Navigation(c.string("url"), target)))
    }

    /** A popup is a sign-in exactly when the flow would not let it load (it starts or refuses one). */
    @TestFactory
    fun popupIsSignIn() = cases("interception") { c ->
        if (c.string("target") != "subframe") {
            val taken = c.obj("expect").string("decision") != "allow"
            val interceptor = Vectors.interceptor()
            assertEquals(taken, interceptor.isSignIn(c.string("url")))
            assertEquals(taken, interceptor.decide(Navigation(c.string("url"), Navigation.Target.POPUP)) != NavigationDecision.Allow)
        }
    }

    @TestFactory
    fun state() = cases("state") { c ->
        val url = "https://accounts.google.com/o/oauth2/v2/auth?" + c.string("query")
        assertDecision(c.obj("expect"), Vectors.interceptor().decide(Navigation(url, Navigation.Target.MAIN_FRAME)))
    }

    @TestFactory
    fun nativeRequest() = cases("native_request") { c ->
        val e = c.obj("expect")
        val request = start(c.string("url"))
        assertEquals(e.string("native_url"), request.url)
        assertEquals(e.string("endpoint"), request.endpoint)
        assertEquals(e.string("state"), request.state)
        assertEquals(e.string("provider"), request.provider)
        assertEquals(e.string("client_id"), request.clientId)
        assertEquals(e.string("redirect_uri"), request.redirectUri)
        assertEquals(e.string("callback_scheme"), request.callbackScheme)
        assertEquals(e.optionalString("code_verifier"), request.codeVerifier)
    }

    @TestFactory
    fun callbackUrl() = cases("callback_url") { c ->
        val interceptor = Vectors.interceptor(c.optionalString("callback_path") ?: Vectors.document.string("callback_path"))
        val request = start(c.string("site_url"), interceptor)
        val e = c.obj("expect")
        val result = Vectors.result(c.obj("result"))
        val key = e.optionalString("error_key")
        if (key == null) {
            assertEquals(e.string("url"), request.callbackUrl(c.string("initial_url"), result))
        } else {
            try {
                request.callbackUrl(c.string("initial_url"), result)
                fail<Unit>("no error for ${c.string("initial_url")}")
            } catch (error: NativeSignInError) {
                assertEquals(key, error.key)
                assertEquals(NativeSignInError.Kind.INITIAL_URL, error.kind)
            }
        }
    }

    @TestFactory
    fun errorMapping() = cases("error_mapping") { c ->
        val outcome = start(c.string("site_url")).outcome(Vectors.result(c.obj("result")))
        val e = c.obj("expect")
        assertEquals(e.optionalString("code"), outcome.code)
        assertEquals(e.optionalString("error"), outcome.error)
    }

    @TestFactory
    fun androidConfiguration() = Vectors.document.obj("configuration").objects("android").mapIndexed { i, c ->
        DynamicTest.dynamicTest("configuration.android[$i] ${c.string("name")}") {
            val e = c.obj("expect")
            val key = e.optionalString("error_key")
            try {
                val config = NativeSignInConfiguration.fromBuildConfig(c.obj("build_config"), c.objects("providers").map { Vectors.oidc(it) })
                if (key != null) fail<Unit>("no error, expected one for $key")
                assertEquals(e["enabled"], config.enabled)
                assertEquals(e.objects("providers"), config.providers.map {
                    mapOf("name" to it.name, "client_id" to it.clientId, "redirect_uri" to it.redirectUri,
                        "callback_scheme" to it.callbackScheme, "pkce" to it.usesPkce)
                })
            } catch (error: NativeSignInError) {
                if (key == null) throw error
                assertEquals(key, error.key, error.toString())
                assertEquals(NativeSignInError.Kind.CONFIGURATION, error.kind)
            }
        }
    }

    private fun start(url: String, interceptor: SignInInterceptor = Vectors.interceptor()): AuthorizationRequest {
        val decision = interceptor.decide(Navigation(url, Navigation.Target.MAIN_FRAME))
        return (decision as? NavigationDecision.StartNativeSignIn ?: throw AssertionError("not started: $url")).request
    }

    private fun assertDecision(expect: Map<String, Any?>, decision: NavigationDecision) {
        when (expect.string("decision")) {
            "allow" -> assertTrue(decision is NavigationDecision.Allow, "$decision")
            "start" -> {
                val request = (decision as? NavigationDecision.StartNativeSignIn ?: throw AssertionError("not started: $decision")).request
                expect.optionalString("provider")?.let { assertEquals(it, request.provider) }
                expect.optionalString("state")?.let { assertEquals(it, request.state) }
            }
            "refuse" -> {
                val error = (decision as? NavigationDecision.Refuse ?: throw AssertionError("not refused: $decision")).error
                assertEquals(expect.string("key"), error.key)
                assertEquals(NativeSignInError.Kind.NAVIGATION, error.kind)
            }
            else -> throw AssertionError("unknown decision in $expect")
        }
    }
}
