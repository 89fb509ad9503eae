import Foundation
import Testing
@testable import NativeSignIn

/// The hand-back strategy: the site's own URL in the system browser, its own callback back in
/// the WebView (through the browser's https callback or a universal link).
@MainActor
@Suite struct HandBackTests {
    static let callbackPath = "/users/auth/google/callback"
    static let strategy = SignInStrategy.handBack(linkPaths: [callbackPath])

    @Test func theSitesOwnURLIsOpenedUnchangedAndTheHTTPSRedirectLoadedAsItIs() throws {
        let app = try FlowApp(strategy: Self.strategy)
        let site = FlowApp.google(state: "s1")
        #expect(app.tap(site) == .cancel)
        let started = try #require(app.browser.started.first)
        #expect(started.url.absoluteString == site)
        #expect(started.native == nil)
        #expect(started.callback == .https(host: "site.example", path: Self.callbackPath))
        #expect(started.provider == "google" && started.state == "s1")

        let redirect = URL(string: "https://site.example\(Self.callbackPath)?state=s1&code=web-code")!
        app.browser.complete(1, .redirect(redirect))
        #expect(app.loads == [redirect])
        #expect(app.outcomes == [SignInOutcome(.completed, signIn: 1)])
    }

    @Test func withoutHTTPSCallbacksTheDefaultBrowserOpensAndTheLinkComesBackOnce() throws {
        let app = try FlowApp(strategy: Self.strategy, httpsCallbacks: false)
        _ = app.tap(FlowApp.google(state: "s1"))
        #expect(app.browser.started.isEmpty)
        #expect(app.browser.openedExternally.map(\.signIn) == [1])
        let link = URL(string: "https://site.example\(Self.callbackPath)?code=web-code&state=s1")!
        #expect(app.flow.open(link: link))
        #expect(!app.flow.open(link: link))
        #expect(app.loads == [link])
        #expect(app.outcomes == [SignInOutcome(.completed, signIn: 1)])
    }

    /// An app without the `webcredentials:` entitlement chooses the universal link on iOS 17.4 too.
    @Test func universalLinksChosenTheDefaultBrowserOpensWhereTheSessionCouldWait() throws {
        let app = try FlowApp(strategy: Self.strategy, httpsCallbacks: true, universalLinks: true)
        _ = app.tap(FlowApp.google(state: "s1"))
        #expect(app.browser.started.isEmpty)
        #expect(app.browser.openedExternally.map(\.signIn) == [1])
        let link = URL(string: "https://site.example\(Self.callbackPath)?code=web-code&state=s1")!
        #expect(app.flow.open(link: link))
        #expect(app.outcomes == [SignInOutcome(.completed, signIn: 1)])
    }

    /// A link can only come back on a claimed path, so the choice brings the link-path check back.
    @Test func universalLinksChosenASiteCallbackOffTheLinkPathsIsRefused() throws {
        let url = "https://accounts.google.com/o/oauth2/v2/auth?state=s1&redirect_uri=https%3A%2F%2Fsite.example%2Fother"
        let waits = try FlowApp(strategy: Self.strategy, httpsCallbacks: true)
        _ = waits.tap(url)
        #expect(waits.browser.started.count == 1)
        let links = try FlowApp(strategy: Self.strategy, httpsCallbacks: true, universalLinks: true)
        #expect(links.tap(url) == .cancel)
        #expect(links.browser.started.isEmpty && links.browser.openedExternally.isEmpty)
        #expect(links.outcomes.map(\.kind) == [.refused])
    }

    @Test(arguments: [
        "https://other.example/users/auth/google/callback?code=c&state=s1",   // another origin
        "http://site.example/users/auth/google/callback?code=c&state=s1",     // another scheme
        "https://site.example:8443/users/auth/google/callback?code=c&state=s1",
        "https://site.example/users/auth/google/callback/extra?code=c&state=s1",
        "https://site.example/account?code=c&state=s1",                       // not a callback path
    ])
    func aLinkOffTheSiteOrOffTheCallbackPathsIsNotTaken(_ link: String) throws {
        let app = try FlowApp(strategy: Self.strategy, httpsCallbacks: false)
        _ = app.tap(FlowApp.google(state: "s1"))
        #expect(!app.flow.open(link: URL(string: link)!))
        #expect(app.loads.isEmpty && app.outcomes.isEmpty && app.flow.isRunning)
    }

    @Test func aLinkIsNotTakenWhenNoHandBackSignInRuns() throws {
        let link = URL(string: "https://site.example\(Self.callbackPath)?code=c&state=s1")!
        let idle = try FlowApp(strategy: Self.strategy, httpsCallbacks: false)
        #expect(!idle.flow.open(link: link))
        let native = try FlowApp()
        _ = native.tap(FlowApp.google(state: "s1"))
        #expect(!native.flow.open(link: link))
        let cancelled = try FlowApp(strategy: Self.strategy, httpsCallbacks: false)
        _ = cancelled.tap(FlowApp.google(state: "s1"))
        cancelled.flow.cancel()
        #expect(!cancelled.flow.open(link: link))
        #expect(idle.loads.isEmpty && native.loads.isEmpty && cancelled.loads.isEmpty)
    }

    @Test func aLinkWithTheProvidersErrorEndsAsProviderErrorOnTheSitesCallback() throws {
        let app = try FlowApp(strategy: Self.strategy, httpsCallbacks: false)
        _ = app.tap(FlowApp.google(state: "s1"))
        #expect(app.flow.open(link: URL(string: "https://site.example\(Self.callbackPath)?error=access_denied&state=s1")!))
        #expect(app.outcomes == [SignInOutcome(.providerError, signIn: 1, reason: "access_denied")])
        #expect(app.loads.map(\.absoluteString) == ["https://site.example\(Self.callbackPath)?error=access_denied&state=s1"])
    }

    @Test func aLinkWithAnotherStateLoadsNoCode() throws {
        let app = try FlowApp(strategy: Self.strategy, httpsCallbacks: false)
        _ = app.tap(FlowApp.google(state: "s1"))
        #expect(app.flow.open(link: URL(string: "https://site.example\(Self.callbackPath)?code=c&state=other")!))
        #expect(app.outcomes == [SignInOutcome(.failed, signIn: 1, reason: "state_mismatch")])
        #expect(app.loads.map(\.absoluteString) == ["https://site.example\(Self.callbackPath)?error=state_mismatch&state=s1"])
    }

    @Test func aDefaultBrowserThatCannotOpenLoadsTheSitesFailure() throws {
        let app = try FlowApp(strategy: Self.strategy, httpsCallbacks: false)
        app.browser.failNextStart = true
        _ = app.tap(FlowApp.google(state: "s1"))
        #expect(app.outcomes == [SignInOutcome(.failed, signIn: 1, reason: "browser_did_not_start")])
        #expect(app.loads.map(\.absoluteString) == ["https://site.example\(Self.callbackPath)?error=sign_in_failed&state=s1"])
    }

    /// UIApplication.open answers in its completion handler, after the flow has moved on: a
    /// "no" then still ends the sign-in it was about, and only that one.
    @Test func aDefaultBrowserThatAnswersNoLaterLoadsTheSitesFailure() throws {
        let app = try FlowApp(strategy: Self.strategy, httpsCallbacks: false)
        app.browser.answerExternalOpensLater = true
        _ = app.tap(FlowApp.google(state: "s1"))
        #expect(app.outcomes.isEmpty && app.flow.isRunning)
        app.browser.reportExternalOpen(1, false)
        #expect(app.outcomes == [SignInOutcome(.failed, signIn: 1, reason: "browser_did_not_start")])
        #expect(app.loads.map(\.absoluteString) == ["https://site.example\(Self.callbackPath)?error=sign_in_failed&state=s1"])
        #expect(!app.flow.isRunning)
    }

    @Test func aLateNoForASupersededOpenLeavesTheNewerSignInRunning() throws {
        let app = try FlowApp(strategy: Self.strategy, httpsCallbacks: false)
        app.browser.answerExternalOpensLater = true
        _ = app.tap(FlowApp.google(state: "s1"))
        _ = app.tap(FlowApp.google(state: "s2"))
        app.browser.reportExternalOpen(1, false)
        app.browser.reportExternalOpen(2, true)
        #expect(app.flow.isRunning)
        #expect(app.outcomes.map(\.kind) == [.superseded])
        #expect(app.loads.isEmpty)
    }

    @Test(arguments: [
        "https://accounts.google.com/o/oauth2/v2/auth?state=s1",                                          // no redirect_uri
        "https://accounts.google.com/o/oauth2/v2/auth?state=s1&redirect_uri=https%3A%2F%2Fevil.test%2Fusers%2Fauth%2Fgoogle%2Fcallback",
        "https://accounts.google.com/o/oauth2/v2/auth?state=s1&redirect_uri=https%3A%2F%2Fsite.example%2Fother",   // not a link path
    ])
    func aSiteURLWhoseAnswerCouldNotComeBackIsRefused(_ url: String) throws {
        let app = try FlowApp(strategy: Self.strategy, httpsCallbacks: false)
        #expect(app.tap(url) == .cancel)
        #expect(app.browser.openedExternally.isEmpty)
        #expect(app.outcomes.map(\.kind) == [.refused])
    }

    @Test func aHandBackStrategyNeedsItsLinkPaths() {
        let error = #expect(throws: NativeSignInError.self) {
            try SignInFlow(interceptor: Fixtures.interceptor, initialURL: FlowApp.site, strategy: .handBack(linkPaths: []),
                           browser: FakeBrowser(), webView: FakeWebView())
        }
        #expect(error?.key == "linkPaths")
    }
}
