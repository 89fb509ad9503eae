import FuzzTargets
#if canImport(Glibc)
import Glibc
#endif

// libFuzzer's driver, entered through the `Fuzz_main` symbol SwiftPM links as `main` (the
// target is built with -parse-as-library, so this file has no top-level code). The target is
// chosen by FUZZ_TARGET; scripts/fuzz builds and runs it under -sanitize=fuzzer,address.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<Int32>,
                         _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                         _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32

nonisolated(unsafe) var selected: (@Sendable (UnsafeRawBufferPointer) -> Void)?

@_cdecl("Fuzz_main")
func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    let name = getenv("FUZZ_TARGET").map { String(cString: $0) } ?? ""
    guard let target = FuzzTargets.all[name] else {
        let names = FuzzTargets.all.keys.sorted().joined(separator: ", ")
        let message = "FUZZ_TARGET must be one of: \(names)\n"
        _ = message.withCString { write(2, $0, strlen($0)) }
        return 2
    }
    selected = target
    var count = argc
    var args = argv
    return LLVMFuzzerRunDriver(&count, &args) { data, size in
        selected!(UnsafeRawBufferPointer(start: data, count: size))
        return 0
    }
}
