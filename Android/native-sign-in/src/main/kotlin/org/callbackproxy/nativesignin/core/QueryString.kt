package org.callbackproxy.nativesignin.core

import java.nio.ByteBuffer
import java.nio.charset.CharacterCodingException
import java.nio.charset.CodingErrorAction
import java.nio.charset.StandardCharsets

/**
 * Reading and writing query strings, the two ways the sign-in needs.
 *
 * Reading follows application/x-www-form-urlencoded (`+` is a space), because that is how web
 * stacks write authorization URLs: `scope=openid+email` means "openid email". Decoding is strict
 * (a `%` without two hex digits, or bytes that are not UTF-8, give a null value) — unlike
 * `java.net.URLDecoder`, which substitutes U+FFFD and would let a malformed `state` through.
 *
 * Writing escapes everything but RFC 3986's unreserved characters, so that no value — a code
 * with `/` or `+`, a state with `&` or `=` — can be read back differently by any parser on the
 * way (the proxy, a WebView, a provider). `android.net.Uri.encode` leaves `!'()*` unescaped too,
 * which is why the core does not use it.
 */
object QueryString {
    data class Field(val name: String, val value: String)

    /** A field as read: [value] is null when it is not valid percent-encoded UTF-8. */
    data class RawField(val name: String, val value: String?)

    /** The fields of a raw (still percent-encoded) query, in order; empty pieces are skipped. */
    fun fields(rawQuery: String?): List<RawField> {
        if (rawQuery == null || rawQuery.isEmpty()) return emptyList()
        return rawQuery.split('&').filter { it.isNotEmpty() }.map { pair ->
            val eq = pair.indexOf('=')
            val rawName = if (eq < 0) pair else pair.substring(0, eq)
            val name = decode(rawName) ?: rawName
            RawField(name, if (eq < 0) "" else decode(pair.substring(eq + 1)))
        }
    }

    /** `name=value&…` with every name and value strictly percent-encoded. */
    fun encode(fields: List<Field>): String =
        fields.joinToString("&") { escape(it.name) + "=" + escape(it.value) }

    fun escape(text: String): String {
        val out = StringBuilder(text.length)
        for (b in text.toByteArray(StandardCharsets.UTF_8)) {
            val byte = b.toInt() and 0xFF
            if (Ascii.isUnreserved(byte)) {
                out.append('\u0000' + byte)
            } else {
                out.append('%').append(HEX[byte shr 4]).append(HEX[byte and 0x0F])
            }
        }
        return out.toString()
    }

    /** Form decoding: `+` is a space, `%XX` a byte; the bytes must be UTF-8. Null otherwise. */
    fun decode(raw: String): String? {
        val bytes = ByteArray(raw.length)
        var count = 0
        var i = 0
        while (i < raw.length) {
            val c = raw[i]
            when {
                c == '+' -> { bytes[count++] = ' '.toAsciiByte(); i += 1 }
                c == '%' -> {
                    if (i + 2 >= raw.length) return null
                    val high = hexValue(raw[i + 1])
                    val low = hexValue(raw[i + 2])
                    if (high < 0 || low < 0) return null
                    bytes[count++] = ((high shl 4) or low).toByte()
                    i += 3
                }
                c > '\u007F' -> return null
                else -> { bytes[count++] = c.toAsciiByte(); i += 1 }
            }
        }
        val decoder = StandardCharsets.UTF_8.newDecoder()
            .onMalformedInput(CodingErrorAction.REPORT)
            .onUnmappableCharacter(CodingErrorAction.REPORT)
        return try {
            decoder.decode(ByteBuffer.wrap(bytes, 0, count)).toString()
        } catch (e: CharacterCodingException) {
            null
        }
    }

    private val HEX = "0123456789ABCDEF".toCharArray()

    private fun hexValue(c: Char): Int = when (c) {
        in '0'..'9' -> c - '0'
        in 'a'..'f' -> c - 'a' + 10
        in 'A'..'F' -> c - 'A' + 10
        else -> -1
    }

    private fun Char.toAsciiByte(): Byte = (this - '\u0000').toByte()
}
