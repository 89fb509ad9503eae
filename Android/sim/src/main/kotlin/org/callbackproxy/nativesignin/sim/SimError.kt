package org.callbackproxy.nativesignin.sim

/** A problem with a request line; the answer is `{"error": message}` and nothing changes. */
class SimError(message: String) : Exception(message)
