package org.callbackproxy.nativesignin.core

import java.nio.charset.StandardCharsets
import java.security.MessageDigest
import java.security.SecureRandom
import java.util.Base64

/**
 * A PKCE pair (RFC 7636) with the S256 method, the only one sent: `plain` would hand the
 * verifier to anyone who sees the authorization URL. The verifier is the core's, not AppAuth's
 * (the glue passes both halves to `setCodeVerifier(verifier, challenge, "S256")`), so that the
 * one handed to `/_oauth_callback` is the one whose challenge went to the provider.
 *
 * `java.util.Base64` needs Android API 26 (or core library desugaring) — see Android/README.md.
 */
class Pkce(val verifier: String) {
    /** BASE64URL(SHA256(ASCII(verifier))), without padding (RFC 7636 §4.2). */
    val challenge: String

    init {
        val length = verifier.toByteArray(StandardCharsets.UTF_8).size
        if (length !in MIN_LENGTH..MAX_LENGTH) {
            throw NativeSignInError.configuration("code_verifier", "a PKCE verifier has 43 to 128 characters, not $length")
        }
        if (!verifier.all { Ascii.isUnreserved(it) }) {
            throw NativeSignInError.configuration("code_verifier", "a PKCE verifier uses only A-Z a-z 0-9 - . _ ~")
        }
        challenge = base64Url(sha256(verifier.toByteArray(StandardCharsets.US_ASCII)))
    }

    override fun equals(other: Any?) = other is Pkce && other.verifier == verifier
    override fun hashCode() = verifier.hashCode()
    override fun toString() = "Pkce(S256)"   // the verifier is a secret until the callback

    companion object {
        const val METHOD = "S256"
        const val MIN_LENGTH = 43
        const val MAX_LENGTH = 128
        /** 64 characters of a 66-character alphabet: about 387 bits, well above the RFC's 256. */
        const val DEFAULT_LENGTH = 64
        const val ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"

        // SecureRandom is the platform CSPRNG (/dev/urandom on Linux, the OpenSSL-backed provider
        // on Android); nextInt(bound) draws without modulo bias. Safe for concurrent use.
        private val random = SecureRandom()

        fun generate(length: Int = DEFAULT_LENGTH): Pkce {
            require(length in MIN_LENGTH..MAX_LENGTH) { "Pkce.generate: length outside 43..128" }
            val verifier = StringBuilder(length)
            repeat(length) { verifier.append(ALPHABET[random.nextInt(ALPHABET.length)]) }
            return Pkce(verifier.toString())
        }

        fun sha256(bytes: ByteArray): ByteArray = MessageDigest.getInstance("SHA-256").digest(bytes)

        fun base64Url(bytes: ByteArray): String = Base64.getUrlEncoder().withoutPadding().encodeToString(bytes)
    }
}
