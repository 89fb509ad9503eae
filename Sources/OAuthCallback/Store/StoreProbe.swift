import ProxyCore

/// What `callback-proxy check --online` asks of a shared store before the first sign-in: every
/// kind of command the proxy sends, once each, on a key of its own (`check:` + random hex, a
/// 30 s TTL, deleted at the end). A store that cannot be reached, refuses the login or the TLS
/// handshake, whose ACL lacks a command (`EVAL` for sessions' compare-and-set, `GETDEL` for
/// relay codes), or whose replicas do not acknowledge within `store_wait_timeout`, is named
/// here rather than by the first user's 503.
public enum StoreProbe {
    /// The steps in order, each depending on the one before; the first that fails is reported.
    enum Step: CaseIterable {
        case setIfAbsent, compareAndSet, replaceLive, get, getAndDelete, delete

        /// The command as the operator's Redis ACL and logs name it.
        var command: String {
            switch self {
            case .setIfAbsent: "SET NX (then WAIT, with store_wait_replicas)"
            case .compareAndSet: "EVAL (the compare-and-set script)"
            case .replaceLive: "SET XX"
            case .get: "GET"
            case .getAndDelete: "GETDEL"
            case .delete: "DEL"
            }
        }
    }

    /// Runs the steps against `store` on `loop`; `done` runs once, on `loop`, with the problem
    /// (none: every command worked). `setting`: what the problem is attributed to (`store`).
    public static func run(_ store: any Store, setting: String = "store", on loop: EventLoop,
                           _ done: @escaping @Sendable ([ProviderProbe.Problem]) -> Void) {
        let suffix = (try? SecureRandom.bytes(8)).map(ReplayGuard.hex) ?? String(EventLoop.monotonicNow())
        let key = "check:" + suffix
        nonisolated(unsafe) var steps = Step.allCases[...]
        nonisolated(unsafe) var next: (() -> Void)? = nil
        let fail = { (step: Step, why: String) in
            done([ProviderProbe.Problem(setting: setting, message: "\(step.command) on a check key failed: \(why)")])
        }
        next = {
            guard let step = steps.popFirst() else { next = nil; return done([]) }
            // Each step's expected answer; anything else, or an error, ends the probe.
            func expect<T: Equatable>(_ result: Result<T, StoreError>, _ wanted: T, _ otherwise: String) {
                switch result {
                case .failure(let error): next = nil; fail(step, error.description)
                case .success(let got) where got != wanted: next = nil; fail(step, otherwise)
                case .success: next?()
                }
            }
            switch step {
            case .setIfAbsent:
                store.setIfAbsentAcknowledged(key: key, value: [0x31], ttlSeconds: 30, on: loop) {
                    expect($0, true, "a new random key was reported as already there")
                }
            case .compareAndSet:
                store.replace(key: key, value: [0x32], ttlSeconds: 30, ifHolding: [0x31], on: loop) {
                    expect($0, true, "the value just written was not replaced")
                }
            case .replaceLive:
                store.replace(key: key, value: [0x33], ttlSeconds: 30, ifHolding: nil, on: loop) {
                    expect($0, true, "the live key was not replaced")
                }
            case .get:
                store.get(key: key, on: loop) { expect($0, [0x33], "read back something else than was written") }
            case .getAndDelete:
                store.getAndDelete(key: key, on: loop) { expect($0, [0x33], "read back something else than was written") }
            case .delete:
                store.delete(key: key, on: loop) { expect($0, false, "the key was still there after GETDEL") }
            }
        }
        next?()
    }
}
