// native-sign-in-sim: the NativeSignIn library behind a JSON-lines protocol, for the
// end-to-end suite's wrapper app (IntegrationTests/e2e/wrapper.py). One request per stdin line, one
// answer per stdout line; protocol in IntegrationTests/e2e/sim-protocol.md. A test peer: not shipped.
import Foundation

let session = Session()
while let line = readLine(strippingNewline: true) {
    FileHandle.standardOutput.write(JSONLine.encode(session.handle(line)))
}
