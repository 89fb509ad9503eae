package org.callbackproxy.nativesignin.core

import org.callbackproxy.nativesignin.core.FlowHarness.Companion.GOOGLE
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

class HandBackTest {
    private val callback = "https://site.example/users/auth/google_oauth2/callback"
    private val site = "$GOOGLE?client_id=web&redirect_uri=https%3A%2F%2Fsite.example%2Fusers%2Fauth%2Fgoogle_oauth2%2Fcallback&state=s1"
    private val handBack = FlowSettings.Strategy.HandBack(setOf("/users/auth/google_oauth2/callback"))

    @Test
    fun withoutHttpsCallbacksTheDefaultBrowserOpensTheSiteUrlAndTheLinkComesBackOnce() {
        val app = FlowHarness(handBack)
        assertEquals(SignInFlow.Policy.CANCEL, app.navigate(site))
        assertEquals(listOf("external $site"), app.log.take())
        val start = app.browser.starts.single()
        assertNull(start.native)
        assertEquals(1, start.session)
        assertTrue(app.flow.openLink("$callback?code=c&state=s1"))
        assertEquals(listOf("load $callback?code=c&state=s1", "outcome s1 completed null"), app.log.take())
        assertFalse(app.flow.openLink("$callback?code=c&state=s1"))
        assertEquals(emptyList<String>(), app.log.take())
    }

    @Test
    fun withHttpsCallbacksTheSessionWaitsForTheSitesRedirectAndLoadsItAsItIs() {
        val app = FlowHarness(handBack, httpsCallbacks = true)
        app.navigate(site)
        val start = app.browser.starts.single()
        assertEquals(BrowserCallback.Https("site.example", "/users/auth/google_oauth2/callback"), start.callback)
        assertEquals(site, start.url)
        app.log.take()
        app.flow.browserCompleted(1, BrowserResult.Redirect("$callback?state=s1&code=c"))
        assertEquals(listOf("load $callback?state=s1&code=c", "outcome s1 completed null"), app.log.take())
    }

    @Test
    fun everyOtherEndingLoadsTheSitesCallbackWithTheErrorAndTheStateSent() {
        val app = FlowHarness(handBack, httpsCallbacks = true)
        val cases = listOf(
            BrowserResult.Cancelled to "error=access_denied&state=s1|user_cancelled null",
            BrowserResult.Failed("x") to "error=sign_in_failed&state=s1|failed browser_failed",
            BrowserResult.Redirect("$callback?code=c&state=other") to "error=state_mismatch&state=s1|failed state_mismatch",
            BrowserResult.Redirect("https://site.example/elsewhere?code=c&state=s1") to "error=invalid_response&state=s1|failed invalid_response",
            BrowserResult.Redirect("$callback?error=access_denied&state=s1") to "error=access_denied&state=s1|provider_error access_denied")
        cases.forEachIndexed { i, (result, expected) ->
            app.navigate(site.replace("state=s1", "state=s1&n=$i"))
            app.log.take()
            app.flow.browserCompleted(i + 1, result)
            val (query, outcome) = expected.split("|")
            assertEquals(listOf("load $callback?$query", "outcome s${i + 1} $outcome"), app.log.take(), expected)
        }
    }

    @Test
    fun aLinkIsTakenOnlyOnTheOriginWithAConfiguredPathWhileAHandBackRuns() {
        val app = FlowHarness(handBack)
        assertFalse(app.flow.openLink("$callback?code=c&state=s1"))         // nothing runs
        app.navigate(site)
        app.log.take()
        for (link in listOf("https://other.example/users/auth/google_oauth2/callback?code=c", "http://site.example/users/auth/google_oauth2/callback",
            "https://site.example/users/auth/google_oauth2/callback/x", "https://u@site.example/users/auth/google_oauth2/callback")) {
            assertFalse(app.flow.openLink(link), link)
        }
        assertTrue(app.flow.openLink("HTTPS://SITE.example:443/users/auth/google_oauth2/callback?error=access_denied&state=s1"))
        assertEquals(listOf("load $callback?error=access_denied&state=s1", "outcome s1 provider_error access_denied"), app.log.take())
    }

    @Test
    fun aLinkCancelsABrowserSessionStillRunning() {
        val app = FlowHarness(handBack, httpsCallbacks = true)
        app.navigate(site)
        app.log.take()
        assertTrue(app.flow.openLink("$callback?code=c&state=other"))
        assertEquals(listOf("cancelled s1", "load $callback?error=state_mismatch&state=s1", "outcome s1 failed state_mismatch"), app.log.take())
    }

    @Test
    fun aNativeFlowTakesNoLinks() {
        val app = FlowHarness()
        app.navigate("$GOOGLE?state=s1")
        assertFalse(app.flow.openLink("$callback?code=c&state=s1"))
    }

    @Test
    fun aSiteRedirectThatCouldNotComeBackIsRefused() {
        val app = FlowHarness(handBack)
        val refusals = listOf(
            "$GOOGLE?state=s1" to "redirect_uri",
            "$GOOGLE?state=s1&redirect_uri=https%3A%2F%2Fevil.test%2Fcb" to "redirect_uri",
            "$GOOGLE?state=s1&redirect_uri=$callback&redirect_uri=$callback" to "redirect_uri",
            "$GOOGLE?state=s1&redirect_uri=https%3A%2F%2Fsite.example%2Fother" to "linkPaths")
        for ((url, key) in refusals) {
            assertEquals(SignInFlow.Policy.CANCEL, app.navigate(url))
            val line = app.log.take().single()
            assertTrue(line.startsWith("outcome null refused $key: "), line)
        }
        assertFalse(app.flow.isRunning)
        // With https callbacks the link paths do not matter: the browser catches the redirect.
        val https = FlowHarness(handBack, httpsCallbacks = true)
        https.navigate("$GOOGLE?state=s1&redirect_uri=https%3A%2F%2Fsite.example%2Fother")
        assertEquals(BrowserCallback.Https("site.example", "/other"), https.browser.starts.single().callback)
    }

    @Test
    fun aDefaultBrowserThatCannotOpenLoadsTheSitesFailure() {
        val app = FlowHarness(handBack)
        app.browser.failNext = true
        app.navigate(site)
        assertEquals(listOf("load $callback?error=sign_in_failed&state=s1", "outcome s1 failed browser_did_not_start"), app.log.take())
    }

    @Test
    fun aHandBackStrategyNeedsItsLinkPaths() {
        for (paths in listOf(emptySet(), setOf("users/callback"))) {
            assertEquals("linkPaths", assertThrows(NativeSignInError::class.java) {
                FlowSettings("https://site.example", FlowSettings.Strategy.HandBack(paths))
            }.key)
        }
    }
}
