package org.callbackproxy.nativesignin.core

/**
 * ASCII-only text helpers. Hosts, schemes and OAuth words are compared in ASCII; the locale
 * dependent `toLowerCase()` (Turkish dotless i) is wrong for them, and its replacement
 * `lowercase()` does not exist in Kotlin 1.3, which this code must compile with.
 */
internal object Ascii {
    fun lower(text: String): String {
        val out = StringBuilder(text.length)
        for (c in text) out.append(if (c in 'A'..'Z') c + ('a' - 'A') else c)
        return out.toString()
    }

    fun isDigits(text: String): Boolean = text.isNotEmpty() && text.all { it in '0'..'9' }

    /** RFC 3986 §2.3: `ALPHA / DIGIT / "-" / "." / "_" / "~"` (also RFC 7636's verifier alphabet). */
    fun isUnreserved(byte: Int): Boolean =
        byte in 'A'.toByteInt()..'Z'.toByteInt() || byte in 'a'.toByteInt()..'z'.toByteInt() ||
            byte in '0'.toByteInt()..'9'.toByteInt() ||
            byte == '-'.toByteInt() || byte == '.'.toByteInt() || byte == '_'.toByteInt() || byte == '~'.toByteInt()

    fun isUnreserved(c: Char): Boolean =
        c in 'A'..'Z' || c in 'a'..'z' || c in '0'..'9' || c == '-' || c == '.' || c == '_' || c == '~'

    /** A character's code without `Char.toInt()` (deprecated in current Kotlin) or `.code` (not in 1.3). */
    fun Char.toByteInt(): Int = this - '\u0000'
}
