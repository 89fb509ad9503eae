// native-sign-in-sim-android: the Android core (Android/native-sign-in, package core) behind the
// JSON-lines protocol of IntegrationTests/e2e/sim-protocol.md, for the end-to-end suite's wrapper app.
// One request per stdin line, one answer per stdout line; logs on stderr. A test peer: not shipped.
// Started by scripts/native-sign-in-sim-android.
@file:JvmName("Main")

package org.callbackproxy.nativesignin.sim

import org.callbackproxy.json.Json
import java.io.BufferedReader
import java.io.InputStreamReader
import java.io.OutputStreamWriter
import java.io.PrintWriter
import java.nio.charset.StandardCharsets

fun main() {
    val input = BufferedReader(InputStreamReader(System.`in`, StandardCharsets.UTF_8))
    val output = PrintWriter(OutputStreamWriter(System.out, StandardCharsets.UTF_8))
    val session = Session()
    while (true) {
        val line = input.readLine() ?: break
        output.print(Json.write(session.handle(line)))
        output.print('\n')
        // The client waits for each answer before it sends the next request.
        output.flush()
    }
}
