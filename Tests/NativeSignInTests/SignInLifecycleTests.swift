import Foundation
import Testing
@testable import NativeSignIn

/// The iOS app's lifecycle around a sign-in: the view made again while the flow lives on, and a
/// process that ends while the browser session is up (SignInFlow+Saved.swift).
@MainActor
@Suite struct SignInLifecycleTests {
    static let callbackPath = HandBackTests.callbackPath

    @Test func aViewMadeAgainMidSignInGetsTheCallback() throws {
        let app = try FlowApp()
        _ = app.tap(FlowApp.google(state: "s1"))
        app.webView = nil                                   // the old view is gone…
        let log = LoadLog()
        let newWebView = FakeWebView(log: log)
        app.flow.attach(webView: newWebView)                // …and its successor attached
        app.browser.complete(1, FlowApp.googleRedirect("code=c1&state=s1"))
        #expect(app.outcomes == [SignInOutcome(.completed, signIn: 1)])
        #expect(log.loads.map { Fixtures.fields($0)["code"] } == ["c1"])
        #expect(app.loads.isEmpty)
    }

    @Test func theRunningSignInIsSavedWithoutCodeOrVerifierAndClearedWhenItEnds() throws {
        let app = try FlowApp()
        var saved: [String?] = []
        app.flow.onSaved = { saved.append($0) }
        #expect(app.flow.saved == nil)
        _ = app.tap(FlowApp.google(state: "s1"))
        let started = try #require(app.browser.started.first)
        let running = try #require(saved.last ?? nil)
        #expect(running == app.flow.saved)
        #expect(running.contains("running=1"))
        #expect(!running.contains(try #require(started.native?.codeVerifier)))
        app.browser.complete(1, FlowApp.googleRedirect("code=c1&state=s1"))
        #expect(saved.count == 2 && saved.last == .some(nil))
        #expect(app.flow.saved == nil)
    }

    @Test func aSessionThatEndedWithTheProcessLoadsTheSitesFailureInTheNextOne() throws {
        let old = try FlowApp()
        _ = old.tap(FlowApp.google(state: "s1"))
        let saved = old.flow.saved

        let app = try FlowApp()                             // the process started again
        var persisted: [String?] = []
        app.flow.onSaved = { persisted.append($0) }
        app.flow.restore(saved)
        #expect(app.outcomes == [SignInOutcome(.failed, signIn: 1, reason: "process_ended")])
        let load = try #require(app.loads.first)
        #expect(app.loads.count == 1)
        #expect(load.absoluteString.hasPrefix("https://site.example/_oauth_callback?provider=google&platform=ios&"))
        #expect(Fixtures.fields(load)["error"] == "sign_in_failed")
        #expect(Fixtures.fields(load)["state"] == "s1")
        #expect(Fixtures.fields(load)["code"] == nil)
        #expect(persisted == [nil])                         // the app's copy is cleared
        #expect(!app.flow.isRunning)
        _ = app.tap(FlowApp.google(state: "s2"))            // numbers go on after the saved one
        #expect(app.browser.started.map(\.signIn) == [2])
    }

    @Test func aHandBackSessionWaitingForTheHTTPSCallbackEndsOnTheSitesOwnFailurePath() throws {
        let old = try FlowApp(strategy: HandBackTests.strategy, httpsCallbacks: true)
        _ = old.tap(FlowApp.google(state: "s1"))
        let app = try FlowApp(strategy: HandBackTests.strategy, httpsCallbacks: true)
        app.flow.restore(old.flow.saved)
        #expect(app.outcomes == [SignInOutcome(.failed, signIn: 1, reason: "process_ended")])
        #expect(app.loads == [URL(string: "https://site.example\(Self.callbackPath)?error=sign_in_failed&state=s1")!])
    }

    /// The default browser runs outside the app: its universal link still comes, to the new process.
    @Test func aHandBackThroughTheDefaultBrowserSurvivesAndItsLinkSignsIn() throws {
        let old = try FlowApp(strategy: HandBackTests.strategy, httpsCallbacks: false)
        _ = old.tap(FlowApp.google(state: "s1"))
        let app = try FlowApp(strategy: HandBackTests.strategy, httpsCallbacks: false)
        app.flow.restore(old.flow.saved)
        #expect(app.outcomes.isEmpty && app.loads.isEmpty)
        #expect(app.flow.isRunning)
        let link = URL(string: "https://site.example\(Self.callbackPath)?code=web-code&state=s1")!
        #expect(app.flow.open(link: link))
        #expect(app.loads == [link])
        #expect(app.outcomes == [SignInOutcome(.completed, signIn: 1)])
    }

    @Test func aSavedSignInThisConfigurationNoLongerRecognisesIsLost() throws {
        let app = try FlowApp()
        app.flow.restore("v=1&running=3&site=" + QueryString.escape("https://other.example/auth?state=s1"))
        #expect(app.outcomes == [SignInOutcome(.lost, signIn: 3, reason: "process_ended")])
        #expect(app.loads.isEmpty)
    }

    @Test(arguments: [nil, "", "v=2&running=1&site=x", "v=1&running=0&site=https%3A%2F%2Fa.example",
                      "v=1&running=1&running=2&site=https%3A%2F%2Fa.example", "v=1&site=https%3A%2F%2Fa.example"])
    func nothingOrSomethingUnreadableRestoresNothing(saved: String?) throws {
        let app = try FlowApp()
        app.flow.restore(saved)
        #expect(app.outcomes.isEmpty && app.loads.isEmpty && !app.flow.isRunning)
    }
}
