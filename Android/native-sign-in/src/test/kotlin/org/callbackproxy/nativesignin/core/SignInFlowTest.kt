package org.callbackproxy.nativesignin.core

import org.callbackproxy.nativesignin.core.FlowHarness.Companion.GOOGLE
import org.callbackproxy.nativesignin.core.FlowHarness.Companion.HEAD
import org.callbackproxy.nativesignin.core.FlowHarness.Companion.REDIRECT
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

class SignInFlowTest {
    private val v = Vectors.codeVerifier

    @Test
    fun aSignInStartsTheNativeRequestAndLoadsTheCallbackWithTheCode() {
        val app = FlowHarness()
        assertEquals(SignInFlow.Policy.CANCEL, app.navigate("$GOOGLE?state=s1&scope=openid"))
        val start = app.browser.starts.single()
        assertEquals(1, start.session)
        assertEquals(BrowserCallback.Scheme("com.googleusercontent.apps.123-and"), start.callback)
        assertEquals(v, start.native!!.codeVerifier)
        assertEquals(listOf("started s1 ${start.native!!.url}"), app.log.take())
        assertTrue(app.flow.isRunning)

        app.flow.browserCompleted(1, BrowserResult.Redirect("$REDIRECT?code=c&state=s1"))
        assertEquals(listOf("load $HEAD&code=c&state=s1&code_verifier=$v", "outcome s1 completed null"), app.log.take())
        assertFalse(app.flow.isRunning)
    }

    @Test
    fun aNavigationThatIsNoSignInIsAllowedAndASubframeNeverStartsOne() {
        val app = FlowHarness()
        assertEquals(SignInFlow.Policy.ALLOW, app.navigate("https://site.example/next"))
        assertEquals(SignInFlow.Policy.ALLOW, app.navigate("$GOOGLE?state=s1", Navigation.Target.SUBFRAME))
        assertEquals(emptyList<String>(), app.log.take())
    }

    @Test
    fun aSecondTapMidSessionCancelsTheOldSessionAndTheNewOneWins() {
        val app = FlowHarness()
        app.navigate("$GOOGLE?state=s1")
        app.log.take()
        app.navigate("$GOOGLE?state=s2", Navigation.Target.POPUP)
        assertEquals(listOf("cancelled s1", "outcome s1 superseded null"), app.log.take().take(2))
        app.flow.browserCompleted(1, BrowserResult.Redirect("$REDIRECT?code=old&state=s1"))
        assertEquals(emptyList<String>(), app.log.take())
        app.flow.browserCompleted(2, BrowserResult.Redirect("$REDIRECT?code=new&state=s2"))
        assertEquals(listOf("load $HEAD&code=new&state=s2&code_verifier=$v", "outcome s2 completed null"), app.log.take())
    }

    @Test
    fun aCompletionDeliveredTwiceFinishesTheSignInOnce() {
        val app = FlowHarness()
        app.navigate("$GOOGLE?state=s1")
        app.log.take()
        app.flow.browserCompleted(1, BrowserResult.Cancelled)
        assertEquals(listOf("load $HEAD&state=s1&error=access_denied", "outcome s1 user_cancelled null"), app.log.take())
        app.flow.browserCompleted(1, BrowserResult.Redirect("$REDIRECT?code=c&state=s1"))
        assertEquals(emptyList<String>(), app.log.take())
    }

    @Test
    fun cancelEndsTheSignInWithoutALoadAndALaterCompletionIsIgnored() {
        val app = FlowHarness()
        app.navigate("$GOOGLE?state=s1")
        app.log.take()
        app.flow.cancel()
        assertEquals(listOf("cancelled s1", "outcome s1 cancelled null"), app.log.take())
        app.flow.cancel()
        app.flow.browserCompleted(1, BrowserResult.Redirect("$REDIRECT?code=c&state=s1"))
        assertEquals(emptyList<String>(), app.log.take())
    }

    @Test
    fun aBrowserThatDoesNotStartLoadsSignInFailedOnceAndStillTakesANumber() {
        val app = FlowHarness()
        app.browser.failNext = true
        assertEquals(SignInFlow.Policy.CANCEL, app.navigate("$GOOGLE?state=s1"))
        assertEquals(listOf("load $HEAD&state=s1&error=sign_in_failed", "outcome s1 failed browser_did_not_start"), app.log.take())
        assertFalse(app.flow.isRunning)
        app.navigate("$GOOGLE?state=s2")
        assertEquals(2, app.browser.starts.single().session)
    }

    @Test
    fun aPopupReportedTwiceStartsOneSession() {
        val app = FlowHarness()
        app.navigate("$GOOGLE?state=s1", Navigation.Target.POPUP)
        app.log.take()
        assertEquals(SignInFlow.Policy.CANCEL, app.navigate("$GOOGLE?state=s1", Navigation.Target.MAIN_FRAME))
        assertEquals(emptyList<String>(), app.log.take())
        assertEquals(1, app.browser.starts.size)
    }

    @Test
    fun theSameUrlAfterTheSignInEndedStartsANewOne() {
        val app = FlowHarness()
        app.navigate("$GOOGLE?state=s1")
        app.flow.browserCompleted(1, BrowserResult.Cancelled)
        app.navigate("$GOOGLE?state=s1")
        assertEquals(2, app.browser.starts.size)
    }

    @Test
    fun aStateMismatchAndAnInvalidResponseFailWithTheirReasons() {
        val app = FlowHarness()
        app.navigate("$GOOGLE?state=s1")
        app.flow.browserCompleted(1, BrowserResult.Redirect("$REDIRECT?code=c&state=forged"))
        app.navigate("$GOOGLE?state=s2")
        app.flow.browserCompleted(2, BrowserResult.Redirect("$REDIRECT?code=c&state=s2&authuser=0&authuser=1"))
        app.navigate("$GOOGLE?state=s3")
        app.flow.browserCompleted(3, BrowserResult.Failed("no browser"))
        app.navigate("$GOOGLE?state=s4")
        app.flow.browserCompleted(4, BrowserResult.Redirect("$REDIRECT?error=access_denied&state=s4"))
        val outcomes = app.log.take().filter { it.startsWith("outcome") }
        assertEquals(listOf("outcome s1 failed state_mismatch", "outcome s2 failed invalid_response",
            "outcome s3 failed browser_failed", "outcome s4 provider_error access_denied"), outcomes)
    }

    @Test
    fun aSessionEndingAfterTheWebViewIsGoneLoadsNothing() {
        val app = FlowHarness()
        app.navigate("$GOOGLE?state=s1")
        app.log.take()
        app.webView.gone = true
        app.flow.browserCompleted(1, BrowserResult.Redirect("$REDIRECT?code=c&state=s1"))
        assertEquals(listOf("outcome s1 webview_gone null"), app.log.take())
    }

    @Test
    fun aRefusedProviderUrlStartsNothingAndLeavesTheRunningSignInAlone() {
        val app = FlowHarness()
        app.navigate("$GOOGLE?state=s1")
        app.log.take()
        assertEquals(SignInFlow.Policy.CANCEL, app.navigate("$GOOGLE?scope=openid"))
        val refused = app.log.take().single()
        assertTrue(refused.startsWith("outcome null refused state: the site's google authorization URL has no state"), refused)
        assertTrue(app.flow.isRunning)
        app.flow.browserCompleted(1, BrowserResult.Redirect("$REDIRECT?code=c&state=s1"))
        assertEquals("outcome s1 completed null", app.log.take().last())
    }

    @Test
    fun aCompletionForAnotherSessionThanTheRunningOneIsIgnored() {
        val app = FlowHarness()
        app.flow.browserCompleted(7, BrowserResult.Cancelled)
        app.navigate("$GOOGLE?state=s1")
        app.log.take()
        app.flow.browserCompleted(2, BrowserResult.Cancelled)
        assertEquals(emptyList<String>(), app.log.take())
    }

    @Test
    fun aNativeClientWithAnHttpsRedirectWaitsForThatHostAndPath() {
        val log = FlowLog()
        val corp = Provider.oidc("corp", "https://login.example.com/auth", "corp-and", "https://App.Example.com/native/cb")
        val browser = FakeBrowser(log)
        val flow = SignInFlow(SignInInterceptor(listOf(corp), Platform.ANDROID), FlowSettings("https://site.example"), browser, FakeWebView(log)) {}
        flow.decide(Navigation("https://login.example.com/auth?state=s", Navigation.Target.MAIN_FRAME))
        assertEquals(BrowserCallback.Https("app.example.com", "/native/cb"), browser.starts.single().callback)
    }

    @Test
    fun aFlowNeedsAnHttpOriginWithoutUserInfo() {
        for (url in listOf("file:///index.html", "about:blank", "https://user@site.example/")) {
            assertEquals("initialURL", assertThrows(NativeSignInError::class.java) { FlowSettings(url) }.key)
        }
        FlowSettings("http://127.0.0.1:8080")       // an http origin with a port is one
    }
}
