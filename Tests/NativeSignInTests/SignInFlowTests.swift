import Foundation
import Testing
@testable import NativeSignIn

@MainActor
@Suite struct SignInFlowTests {
    @Test func aSignInStartsTheNativeRequestAndLoadsTheCallbackWithTheCode() throws {
        let app = try FlowApp(ephemeral: true)
        #expect(app.tap(FlowApp.google(state: "s1")) == .cancel)
        let started = try #require(app.browser.started.first)
        #expect(started.signIn == 1)
        #expect(started.callback == .scheme("com.googleusercontent.apps.123-ios"))
        #expect(started.prefersEphemeralSession)
        #expect(started.native?.clientID == Fixtures.googleClientID)
        #expect(started.url.host == "accounts.google.com" && Fixtures.fields(started.url)["client_id"] == Fixtures.googleClientID)

        app.browser.complete(1, FlowApp.googleRedirect("code=c1&state=s1"))
        #expect(app.outcomes == [SignInOutcome(.completed, signIn: 1)])
        let load = try #require(app.loads.first)
        #expect(app.loads.count == 1)
        #expect(load.absoluteString.hasPrefix("https://site.example/_oauth_callback?provider=google&platform=ios&"))
        #expect(Fixtures.fields(load)["code"] == "c1")
        #expect(Fixtures.fields(load)["code_verifier"] == started.native?.codeVerifier)
        #expect(!app.flow.isRunning)
    }

    @Test func aSecondTapMidSessionCancelsTheOldSessionAndTheNewOneWins() throws {
        let app = try FlowApp()
        _ = app.tap(FlowApp.google(state: "old"))
        #expect(app.tap(FlowApp.google(state: "new")) == .cancel)
        #expect(app.browser.cancelled == [1])
        #expect(app.browser.started.map(\.state) == ["old", "new"])
        #expect(app.outcomes == [SignInOutcome(.superseded, signIn: 1)])

        // The old session's late completion is ignored: nothing loaded, no second outcome.
        app.browser.complete(1, FlowApp.googleRedirect("code=old-code&state=old"))
        #expect(app.loads.isEmpty)
        #expect(app.outcomes.count == 1)

        app.browser.complete(2, FlowApp.googleRedirect("code=new-code&state=new"))
        #expect(app.outcomes.last == SignInOutcome(.completed, signIn: 2))
        #expect(app.loads.map { Fixtures.fields($0)["code"] } == ["new-code"])
    }

    @Test func aCompletionDeliveredTwiceFinishesTheSignInOnce() throws {
        let app = try FlowApp()
        _ = app.tap(FlowApp.google(state: "s1"))
        app.browser.complete(1, FlowApp.googleRedirect("code=c1&state=s1"))
        app.browser.complete(1, FlowApp.googleRedirect("code=c1&state=s1"))
        app.browser.complete(1, .cancelled)
        #expect(app.loads.count == 1)
        #expect(app.outcomes == [SignInOutcome(.completed, signIn: 1)])
    }

    @Test func cancelEndsTheSignInWithoutALoadAndALaterCompletionIsIgnored() throws {
        let app = try FlowApp()
        _ = app.tap(FlowApp.google(state: "s1"))
        app.flow.cancel()
        #expect(app.browser.cancelled == [1])
        #expect(app.outcomes == [SignInOutcome(.cancelled, signIn: 1)])
        app.browser.complete(1, FlowApp.googleRedirect("code=c1&state=s1"))
        app.flow.cancel()
        #expect(app.loads.isEmpty)
        #expect(app.outcomes.count == 1)
        #expect(app.browser.cancelled == [1])
    }

    @Test func aBrowserThatDoesNotStartLoadsSignInFailedOnce() throws {
        let app = try FlowApp()
        app.browser.failNextStart = true
        #expect(app.tap(FlowApp.google(state: "s1")) == .cancel)
        #expect(app.outcomes == [SignInOutcome(.failed, signIn: 1, reason: "browser_did_not_start")])
        let load = try #require(app.loads.first)
        #expect(Fixtures.fields(load)["error"] == "sign_in_failed")
        #expect(Fixtures.fields(load)["state"] == "s1")
        #expect(Fixtures.fields(load)["code"] == nil)
        #expect(!app.flow.isRunning)
        // The next tap starts normally, and takes the next number.
        _ = app.tap(FlowApp.google(state: "s2"))
        #expect(app.browser.started.map(\.signIn) == [1, 2])
        #expect(app.flow.isRunning)
    }

    @Test func aPopupReportedThroughBothDelegatePathsStartsOneSession() throws {
        let app = try FlowApp()
        let url = FlowApp.google(state: "s1")
        #expect(app.tap(url, .popup) == .cancel)      // decidePolicyFor, targetFrame == nil
        #expect(app.tap(url, .popup) == .cancel)      // createWebViewWith
        #expect(app.browser.started.count == 1)
        #expect(app.browser.cancelled.isEmpty)
        #expect(app.outcomes.isEmpty)
        // The same URL after that sign-in ended is a new tap.
        app.browser.complete(1, .cancelled)
        _ = app.tap(url, .popup)
        #expect(app.browser.started.count == 2)
    }

    struct Ending: CustomTestStringConvertible, Sendable {
        let result: BrowserResult
        let outcome: SignInOutcome
        let error: String
        var testDescription: String { "\(result) → \(outcome)" }
    }

    @Test(arguments: [
        Ending(result: .cancelled, outcome: SignInOutcome(.userCancelled, signIn: 1), error: "access_denied"),
        Ending(result: .failed, outcome: SignInOutcome(.failed, signIn: 1, reason: "browser_failed"), error: "sign_in_failed"),
        Ending(result: FlowApp.googleRedirect("code=c&state=other"),
               outcome: SignInOutcome(.failed, signIn: 1, reason: "state_mismatch"), error: "state_mismatch"),
        Ending(result: FlowApp.googleRedirect("code=c&state=s1&authuser=0&authuser=1"),
               outcome: SignInOutcome(.failed, signIn: 1, reason: "invalid_response"), error: "invalid_response"),
        Ending(result: FlowApp.googleRedirect("error=access_denied&state=s1"),
               outcome: SignInOutcome(.providerError, signIn: 1, reason: "access_denied"), error: "access_denied"),
        Ending(result: FlowApp.googleRedirect("error=%3Cb%3E&state=s1"),
               outcome: SignInOutcome(.providerError, signIn: 1, reason: "sign_in_failed"), error: "sign_in_failed"),
    ])
    func anUnsuccessfulEndingLoadsTheCallbackWithItsErrorAndNoCode(_ c: Ending) throws {
        let app = try FlowApp()
        _ = app.tap(FlowApp.google(state: "s1"))
        app.browser.complete(1, c.result)
        #expect(app.outcomes == [c.outcome])
        let load = try #require(app.loads.first)
        #expect(app.loads.count == 1)
        #expect(Fixtures.fields(load)["error"] == c.error)
        #expect(Fixtures.fields(load)["state"] == "s1")
        #expect(Fixtures.fields(load)["code"] == nil)
    }

    @Test func aSessionEndingAfterTheWebViewIsGoneLoadsNothing() throws {
        let app = try FlowApp()
        _ = app.tap(FlowApp.google(state: "s1"))
        app.webView = nil
        #expect(app.flow.webView == nil)
        app.browser.complete(1, FlowApp.googleRedirect("code=c1&state=s1"))
        #expect(app.loads.isEmpty)
        #expect(app.outcomes == [SignInOutcome(.webViewGone, signIn: 1)])
    }

    @Test func aRefusedProviderURLStartsNothingAndLeavesTheRunningSignInAlone() throws {
        let app = try FlowApp()
        _ = app.tap(FlowApp.google(state: "s1"))
        #expect(app.tap("https://accounts.google.com/o/oauth2/v2/auth?scope=openid") == .cancel)
        #expect(app.browser.started.count == 1)
        #expect(app.browser.cancelled.isEmpty)
        let refusal = try #require(app.outcomes.first)
        #expect(refusal.kind == .refused && refusal.signIn == nil)
        #expect(refusal.reason?.hasPrefix("state: ") == true)
        app.browser.complete(1, FlowApp.googleRedirect("code=c1&state=s1"))
        #expect(app.outcomes.last == SignInOutcome(.completed, signIn: 1))
    }

    @Test(arguments: [("https://site.example/page", Navigation.Target.mainFrame),
                      ("https://accounts.google.com/o/oauth2/v2/auth?state=s", .subframe),
                      ("https://appleid.apple.com/auth/authorize?state=s&response_mode=form_post", .mainFrame)])
    func whatIsNotASignInIsAllowedAndStartsNothing(_ url: String, _ target: Navigation.Target) throws {
        let app = try FlowApp()
        #expect(app.tap(url, target) == .allow)
        #expect(app.browser.started.isEmpty && app.outcomes.isEmpty && app.loads.isEmpty)
    }

    @Test func aFlowNeedsAnHTTPOrigin() {
        let error = #expect(throws: NativeSignInError.self) {
            try SignInFlow(interceptor: Fixtures.interceptor, initialURL: URL(string: "file:///index.html")!,
                           browser: FakeBrowser(), webView: FakeWebView())
        }
        #expect(error?.kind == .initialURL)
    }
}
