package org.callbackproxy.nativesignin.core

import org.callbackproxy.nativesignin.core.FlowHarness.Companion.GOOGLE
import org.callbackproxy.nativesignin.core.FlowHarness.Companion.HEAD
import org.callbackproxy.nativesignin.core.FlowHarness.Companion.REDIRECT
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

/**
 * The Android lifecycle decisions: results as the platform returns them (no session number),
 * recreation through saved state, process restarts, close. Each case is one the glue used to get
 * wrong: it reported every result as the latest launch's, kept everything in memory, and
 * cancelled in close().
 */
class SignInLifecycleTest {
    private val v = Vectors.codeVerifier
    private val google = ReturnedRequest("s1", "123-and.apps.googleusercontent.com", REDIRECT, v)

    private fun returned(state: String) = ReturnedRequest(state, google.clientId, google.redirectUri, v)
    private fun code(code: String, state: String) =
        LaunchResult(BrowserResult.Redirect("$REDIRECT?code=$code&state=$state"), returned(state))

    /** AppAuth's activity finished by the newer launch: RESULT_CANCELED, no data, no state. */
    private val finishedFromOutside = LaunchResult(BrowserResult.Failed("finished without a result"))
    private val userCancelled = LaunchResult(BrowserResult.Cancelled)

    private fun doubleTap(app: FlowHarness) {
        app.navigate("$GOOGLE?state=s1")
        app.navigate("$GOOGLE?state=s2", Navigation.Target.POPUP)
        app.log.take()
    }

    @Test
    fun aSupersededLaunchsCancelArrivingAfterTheSecondLaunchIsIgnoredAndTheSecondCodeSignsIn() {
        val app = FlowHarness()
        doubleTap(app)
        // The old glue reported this as the latest launch's failure (error=sign_in_failed for s2).
        app.flow.activityResult(finishedFromOutside)
        assertEquals(emptyList<String>(), app.log.take())
        assertTrue(app.flow.isRunning)
        app.flow.activityResult(code("new", "s2"))
        assertEquals(listOf("load $HEAD&code=new&state=s2&code_verifier=$v", "outcome s2 completed null"), app.log.take())
    }

    @Test
    fun aResultWithoutStateGoesToTheOldestLaunchStillOutEvenAUsersCancel() {
        val app = FlowHarness()
        doubleTap(app)
        app.flow.activityResult(userCancelled)
        assertEquals(emptyList<String>(), app.log.take())
        app.flow.activityResult(userCancelled)
        assertEquals(listOf("load $HEAD&state=s2&error=access_denied", "outcome s2 user_cancelled null"), app.log.take())
    }

    @Test
    fun resultsOutOfOrderEachFindTheirLaunchByState() {
        val app = FlowHarness()
        doubleTap(app)
        app.flow.activityResult(code("new", "s2"))
        assertEquals(listOf("load $HEAD&code=new&state=s2&code_verifier=$v", "outcome s2 completed null"), app.log.take())
        // The superseded launch's result, late, and a repeat of the latest: nothing.
        app.flow.activityResult(code("old", "s1"))
        app.flow.activityResult(code("new", "s2"))
        app.flow.activityResult(finishedFromOutside)
        assertEquals(emptyList<String>(), app.log.take())
    }

    @Test
    fun aSupersededLaunchsRedirectIsIgnoredAndLeavesTheLatestRunning() {
        val app = FlowHarness()
        doubleTap(app)
        app.flow.activityResult(code("old", "s1"))
        assertEquals(emptyList<String>(), app.log.take())
        app.flow.activityResult(code("new", "s2"))
        assertEquals("outcome s2 completed null", app.log.take().last())
    }

    @Test
    fun aRedirectWhoseStateNoLaunchSentIsTheOldestLaunchsAndAStateMismatch() {
        val app = FlowHarness()
        app.navigate("$GOOGLE?state=s1")
        app.log.take()
        app.flow.activityResult(LaunchResult(BrowserResult.Redirect("$REDIRECT?code=c&state=evil")))
        assertEquals(listOf("load $HEAD&state=s1&error=state_mismatch", "outcome s1 failed state_mismatch"), app.log.take())
    }

    @Test
    fun rotationKeepsTheSignInAndTheResultCompletesInTheNewActivity() {
        val app = FlowHarness()
        app.navigate("$GOOGLE?state=s1")
        app.log.take()
        // The old close() cancelled here: "cancelled s1", "outcome s1 cancelled".
        assertEquals(SignInFlow.Close.KEPT, app.recreateActivity())
        assertEquals(SignInFlow.Close.KEPT, app.recreateActivity(), "a second rotation saves what the first restored")
        assertEquals(emptyList<String>(), app.log.take())
        assertTrue(app.flow.isRunning)
        app.flow.activityResult(code("c", "s1"))
        assertEquals(listOf("load $HEAD&code=c&state=s1&code_verifier=$v", "outcome s1 completed null"), app.log.take())
    }

    @Test
    fun afterRotationACancelWithoutStateIsStillTheSignInsAndLoadsItsState() {
        val app = FlowHarness()
        app.navigate("$GOOGLE?state=s1")
        app.log.take()
        app.recreateActivity()
        app.flow.activityResult(userCancelled)
        assertEquals(listOf("load $HEAD&state=s1&error=access_denied", "outcome s1 user_cancelled null"), app.log.take())
    }

    @Test
    fun aDoubleTapThenRotationStillIgnoresTheFirstLaunchAndNumbersGoOn() {
        val app = FlowHarness()
        doubleTap(app)
        app.recreateActivity()
        app.flow.activityResult(finishedFromOutside)
        assertEquals(emptyList<String>(), app.log.take())
        app.flow.activityResult(code("new", "s2"))
        assertEquals(listOf("load $HEAD&code=new&state=s2&code_verifier=$v", "outcome s2 completed null"), app.log.take())
        app.navigate("$GOOGLE?state=s3")
        assertEquals(3, app.browser.starts.last().session)
    }

    @Test
    fun afterRotationTheVerifierComesFromTheResultNotFromSavedState() {
        val app = FlowHarness()
        app.navigate("$GOOGLE?state=s1")
        val saved = app.flow.saved().encoded
        assertFalse(saved.contains(v), saved)
        app.recreateActivity()
        app.log.take()
        // A code whose result lost the request: the site could not redeem it.
        app.flow.activityResult(LaunchResult(BrowserResult.Redirect("$REDIRECT?code=c&state=s1")))
        assertEquals(listOf("load $HEAD&state=s1&error=sign_in_failed", "outcome s1 failed verifier_lost"), app.log.take())
    }

    @Test
    fun aProcessRestartedWhileTheBrowserRanCompletesFromTheResultAlone() {
        val app = FlowHarness()
        app.navigate("$GOOGLE?state=s1")
        app.log.take()
        app.restartProcess()
        assertFalse(app.flow.isRunning)
        app.flow.activityResult(code("c", "s1"))
        assertEquals(listOf("load $HEAD&code=c&state=s1&code_verifier=$v", "outcome null completed null"), app.log.take())
        app.flow.activityResult(code("c", "s1"))
        assertEquals(emptyList<String>(), app.log.take(), "a second delivery")
    }

    @Test
    fun afterAProcessRestartAProviderErrorFindsItsProviderByTheRedirect() {
        val app = FlowHarness()
        app.restartProcess()
        app.flow.activityResult(LaunchResult(BrowserResult.Redirect("$REDIRECT?error=access_denied&state=s1")))
        assertEquals(listOf("load $HEAD&state=s1&error=access_denied", "outcome null provider_error access_denied"), app.log.take())
        app.restartProcess()
        app.flow.activityResult(LaunchResult(BrowserResult.Redirect("fb4242://authorize?code=c&state=s1")))
        assertEquals(listOf("load https://site.example/_oauth_callback?provider=facebook&platform=android&client_id=4242" +
            "&redirect_uri=fb4242%3A%2F%2Fauthorize&code=c&state=s1", "outcome null completed null"), app.log.take())
    }

    @Test
    fun afterAProcessRestartWhatCarriesTooLittleIsLostAndLoadsNothing() {
        val app = FlowHarness()
        app.navigate("$GOOGLE?state=s1")
        app.log.take()
        app.restartProcess()
        app.flow.activityResult(userCancelled)
        assertEquals(listOf("outcome null lost no_state"), app.log.take())
        app.restartProcess()
        app.flow.activityResult(LaunchResult(BrowserResult.Redirect("other:/cb?code=c&state=s1")))
        assertEquals(listOf("outcome null lost unknown_provider"), app.log.take())
        app.restartProcess()
        app.flow.activityResult(LaunchResult(BrowserResult.Redirect("$REDIRECT?code=c&state=s1")))
        assertEquals(listOf("load $HEAD&state=s1&error=sign_in_failed", "outcome null failed verifier_lost"), app.log.take())
    }

    @Test
    fun closeEndsTheSignInOnlyWhenTheActivityIsFinishingForGoodAndNeverRelaunchesIt() {
        val app = FlowHarness()
        app.navigate("$GOOGLE?state=s1")
        app.log.take()
        assertEquals(SignInFlow.Close.KEPT, app.flow.close(activityFinishing = false, changingConfigurations = true))
        assertEquals(SignInFlow.Close.KEPT, app.flow.close(activityFinishing = false, changingConfigurations = false))
        assertEquals(SignInFlow.Close.KEPT, app.flow.close(activityFinishing = true, changingConfigurations = true))
        assertEquals(emptyList<String>(), app.log.take())
        assertEquals(SignInFlow.Close.ENDED, app.flow.close(activityFinishing = true, changingConfigurations = false))
        // No "cancelled s1": the browser is not told from a dying activity.
        assertEquals(listOf("outcome s1 cancelled null"), app.log.take())
        app.flow.activityResult(code("c", "s1"))
        assertEquals(emptyList<String>(), app.log.take())
    }

    @Test
    fun savedStateSurvivesItsStringFormAndAnythingElseDecodesToNothing() {
        val app = FlowHarness()
        doubleTap(app)
        val saved = app.flow.saved().encoded
        assertEquals("v=1&started=2&running=2&state=s2&provider=google&launch=1%3As1&launch=2%3As2", saved)
        assertEquals(saved, SavedSignIn.decode(saved)!!.encoded)
        assertEquals("v=1&started=0", FlowHarness().flow.saved().encoded)
        for (bad in listOf(null, "", "v=2&started=0", "v=1", "v=1&started=01", "v=1&started=1&launch=2%3As2",
                "v=1&started=1&running=1&provider=google", "v=1&started=1&launch=1", "v=1&v=1&started=0", "v=1&started=%ZZ",
                "v=1&started=1&running=1&state=s1", "v=1&started=1&running=1&state=s1&provider=google&site=https%3A%2F%2Fx")) {
            assertNull(SavedSignIn.decode(bad), "$bad")
        }
        assertNotNull(SavedSignIn.decode("v=1&started=3"))
    }

    @Test
    fun aHandBackSignInSurvivesRotationAndItsAppLinkIsStillTaken() {
        val callback = "https://site.example/users/auth/google_oauth2/callback"
        val site = "$GOOGLE?client_id=web&redirect_uri=https%3A%2F%2Fsite.example%2Fusers%2Fauth%2Fgoogle_oauth2%2Fcallback&state=s1"
        val app = FlowHarness(FlowSettings.Strategy.HandBack(setOf("/users/auth/google_oauth2/callback")))
        app.navigate(site)
        app.log.take()
        // The old glue lost it here: the link then was "not ours" and the sign-in never ended.
        app.recreateActivity()
        assertFalse(app.flow.openLink("https://site.example/elsewhere?code=c&state=s1"))
        assertTrue(app.flow.openLink("$callback?code=c&state=s1"))
        assertEquals(listOf("load $callback?code=c&state=s1", "outcome s1 completed null"), app.log.take())
        // After a restart without saved state nothing runs: the link is the app's.
        app.navigate(site.replace("state=s1", "state=s2"))
        app.restartProcess()
        assertFalse(app.flow.openLink("$callback?code=c&state=s2"))
    }

    @Test
    fun aResultsStateIsTheRequestsElseTheRedirectsOneState() {
        assertEquals("sent", LaunchResult(BrowserResult.Redirect("$REDIRECT?code=c&state=back"), returned("sent")).state)
        assertEquals("back", LaunchResult(BrowserResult.Redirect("$REDIRECT?code=c&state=back")).state)
        assertNull(LaunchResult(BrowserResult.Redirect("$REDIRECT?code=c&state=a&state=b")).state)
        assertNull(LaunchResult(BrowserResult.Redirect("$REDIRECT?code=c&state=")).state)
        assertNull(userCancelled.state)
    }

    @Test
    fun aLaunchThatDidNotStartIsNoLaunchAResultLaterFinds() {
        val app = FlowHarness()
        app.browser.failNext = true
        app.navigate("$GOOGLE?state=s1")
        app.log.take()
        assertEquals("v=1&started=1", app.flow.saved().encoded)
    }
}
