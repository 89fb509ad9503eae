package org.callbackproxy.nativesignin.core

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

class PkceTest {
    @Test
    fun theChallengeIsRfc7636AppendixBsVector() {
        assertEquals("E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", Pkce("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk").challenge)
        assertEquals("S256", Pkce.METHOD)
    }

    @Test
    fun sha256IsFips180sVectorForAbc() {
        val hex = Pkce.sha256("abc".toByteArray()).joinToString("") { String.format("%02x", it.toInt() and 0xFF) }
        assertEquals("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", hex)
    }

    @Test
    fun generatedVerifiersHaveTheDefaultLengthAndUseTheWholeRfcAlphabet() {
        val seen = HashSet<Char>()
        val verifiers = HashSet<String>()
        repeat(300) {
            val pair = Pkce.generate()
            assertEquals(Pkce.DEFAULT_LENGTH, pair.verifier.length)
            assertEquals(43, pair.challenge.length)       // 32 bytes, base64url without padding
            seen.addAll(pair.verifier.toList())
            verifiers.add(pair.verifier)
        }
        // 19,200 draws from 66 characters: a missing one has a probability below 1e-120.
        assertEquals(Pkce.ALPHABET.toSet(), seen)
        assertEquals(300, verifiers.size)
    }

    @Test
    fun theRfcsLengthBoundsCanBeGeneratedAndAccepted() {
        assertEquals(43, Pkce.generate(43).verifier.length)
        assertEquals(128, Pkce.generate(128).verifier.length)
        Pkce("~".repeat(43))
        Pkce("-".repeat(128))
    }

    @Test
    fun aVerifierOutsideTheRfcIsRefused() {
        for (verifier in listOf("a".repeat(42), "a".repeat(129), "a".repeat(42) + "+", "a".repeat(42) + "=", "a".repeat(42) + "é")) {
            val error = assertThrows(NativeSignInError::class.java) { Pkce(verifier) }
            assertEquals("code_verifier", error.key)
        }
        assertTrue(Pkce("a".repeat(43)).toString().indexOf("aaa") < 0, "toString must not show the verifier")
    }
}
