package org.callbackproxy.json

/**
 * A small strict JSON (RFC 8259) reader and writer, JDK only: the JDK has no JSON library, and
 * `org.json` on Android is a stub in JVM unit tests. Used by the simulator (its JSON-lines
 * protocol) and by the tests that read the shared contract vectors.
 *
 * Values: `null`, [Boolean], [Long] (integers that fit) or [Double], [String], [List], and
 * [Map] with [String] keys (a [LinkedHashMap] in document order). Strict means: no comments,
 * no trailing commas, no leading zeros, no unescaped control characters, no lone surrogates, no
 * duplicate keys (which copy a reader takes differs between stacks), nothing after the value.
 */
object Json {
    class Error(message: String) : Exception(message)

    /** Nesting deeper than this is refused rather than recursed into. */
    const val MAX_DEPTH = 64

    fun parse(text: String): Any? = Reader(text).document()

    /** One line of JSON: object keys sorted, `/` and non-ASCII as they are. */
    fun write(value: Any?): String = StringBuilder().also { writeTo(it, value) }.toString()

    private fun writeTo(out: StringBuilder, value: Any?) {
        when (value) {
            null -> out.append("null")
            is Boolean -> out.append(if (value) "true" else "false")
            is Int, is Long, is Short, is Byte -> out.append(value.toString())
            is Double -> {
                if (value.isNaN() || value.isInfinite()) throw Error("JSON has no NaN or infinity")
                out.append(if (value == Math.rint(value) && Math.abs(value) < 1e15) value.toLong().toString() else value.toString())
            }
            is String -> writeString(out, value)
            is Map<*, *> -> {
                out.append('{')
                val keys = value.keys.map { it as? String ?: throw Error("JSON object keys are strings") }.sorted()
                keys.forEachIndexed { i, key ->
                    if (i > 0) out.append(',')
                    writeString(out, key)
                    out.append(':')
                    writeTo(out, value[key])
                }
                out.append('}')
            }
            is List<*> -> {
                out.append('[')
                value.forEachIndexed { i, item ->
                    if (i > 0) out.append(',')
                    writeTo(out, item)
                }
                out.append(']')
            }
            else -> throw Error("cannot write a ${value.javaClass.name} as JSON")
        }
    }

    private fun writeString(out: StringBuilder, text: String) {
        out.append('"')
        for (c in text) {
            when (c) {
                '"' -> out.append("\\\"")
                '\\' -> out.append("\\\\")
                '\n' -> out.append("\\n")
                '\r' -> out.append("\\r")
                '\t' -> out.append("\\t")
                '\b' -> out.append("\\b")
                '\u000C' -> out.append("\\f")
                else -> if (c < ' ') out.append(String.format("\\u%04x", c - '\u0000')) else out.append(c)
            }
        }
        out.append('"')
    }

    private class Reader(private val text: String) {
        private var at = 0

        fun document(): Any? {
            val value = value(0)
            skipSpace()
            if (at != text.length) fail("unexpected text after the value")
            return value
        }

        private fun value(depth: Int): Any? {
            if (depth > MAX_DEPTH) fail("nesting deeper than $MAX_DEPTH")
            skipSpace()
            if (at >= text.length) fail("a value is missing")
            return when (text[at]) {
                '{' -> objectValue(depth)
                '[' -> arrayValue(depth)
                '"' -> stringValue()
                't' -> literal("true", true)
                'f' -> literal("false", false)
                'n' -> literal("null", null)
                else -> numberValue()
            }
        }

        private fun objectValue(depth: Int): Map<String, Any?> {
            at += 1
            val result = LinkedHashMap<String, Any?>()
            skipSpace()
            if (peek() == '}') { at += 1; return result }
            while (true) {
                skipSpace()
                if (peek() != '"') fail("an object key must be a string")
                val key = stringValue()
                if (result.containsKey(key)) fail("the key \"$key\" appears twice")
                skipSpace()
                expect(':')
                result[key] = value(depth + 1)
                skipSpace()
                when (peek()) {
                    ',' -> at += 1
                    '}' -> { at += 1; return result }
                    else -> fail("expected , or } in an object")
                }
            }
        }

        private fun arrayValue(depth: Int): List<Any?> {
            at += 1
            val result = ArrayList<Any?>()
            skipSpace()
            if (peek() == ']') { at += 1; return result }
            while (true) {
                result.add(value(depth + 1))
                skipSpace()
                when (peek()) {
                    ',' -> at += 1
                    ']' -> { at += 1; return result }
                    else -> fail("expected , or ] in an array")
                }
            }
        }

        private fun stringValue(): String {
            at += 1
            val out = StringBuilder()
            while (true) {
                if (at >= text.length) fail("a string is not closed")
                val c = text[at++]
                if (c == '"') return out.toString()
                when {
                    c == '\\' -> out.append(escape())
                    c < ' ' -> fail("a control character must be escaped in a string")
                    c.isSurrogate() -> {
                        if (!c.isHighSurrogate() || at >= text.length || !text[at].isLowSurrogate()) fail("a lone surrogate in a string")
                        out.append(c).append(text[at++])
                    }
                    else -> out.append(c)
                }
            }
        }

        private fun escape(): String {
            if (at >= text.length) fail("an escape is not finished")
            return when (val c = text[at++]) {
                '"' -> "\""
                '\\' -> "\\"
                '/' -> "/"
                'b' -> "\b"
                'f' -> "\u000C"
                'n' -> "\n"
                'r' -> "\r"
                't' -> "\t"
                'u' -> {
                    val first = hex4()
                    when {
                        first.isHighSurrogate() -> {
                            if (!text.startsWith("\\u", at)) fail("a lone surrogate in a string")
                            at += 2
                            val second = hex4()
                            if (!second.isLowSurrogate()) fail("a lone surrogate in a string")
                            String(charArrayOf(first, second))
                        }
                        first.isLowSurrogate() -> fail("a lone surrogate in a string")
                        else -> first.toString()
                    }
                }
                else -> fail("\\$c is not a JSON escape")
            }
        }

        private fun hex4(): Char {
            if (at + 4 > text.length) fail("\\u needs four hex digits")
            var value = 0
            for (i in 0 until 4) {
                val c = text[at + i]
                val digit = when (c) {
                    in '0'..'9' -> c - '0'
                    in 'a'..'f' -> c - 'a' + 10
                    in 'A'..'F' -> c - 'A' + 10
                    else -> fail("\\u needs four hex digits")
                }
                value = value * 16 + digit
            }
            at += 4
            return '\u0000' + value
        }

        private fun numberValue(): Any {
            val start = at
            if (peek() == '-') at += 1
            when {
                peek() == '0' -> at += 1
                peek() in '1'..'9' -> while (peek() in '0'..'9') at += 1
                else -> fail("unexpected character")
            }
            var integer = true
            if (peek() == '.') {
                integer = false
                at += 1
                if (peek() !in '0'..'9') fail("a digit must follow the decimal point")
                while (peek() in '0'..'9') at += 1
            }
            if (peek() == 'e' || peek() == 'E') {
                integer = false
                at += 1
                if (peek() == '+' || peek() == '-') at += 1
                if (peek() !in '0'..'9') fail("a digit must follow the exponent")
                while (peek() in '0'..'9') at += 1
            }
            val number = text.substring(start, at)
            if (integer) {
                val long = number.toLongOrNull()
                if (long != null) return long
            }
            return number.toDouble()
        }

        private fun literal(word: String, value: Any?): Any? {
            if (!text.startsWith(word, at)) fail("unexpected character")
            at += word.length
            return value
        }

        private fun skipSpace() {
            while (at < text.length && (text[at] == ' ' || text[at] == '\t' || text[at] == '\n' || text[at] == '\r')) at += 1
        }

        /** The next character, or NUL at the end (NUL is never valid outside a string). */
        private fun peek(): Char = if (at < text.length) text[at] else '\u0000'

        private fun expect(c: Char) {
            if (peek() != c) fail("expected $c")
            at += 1
        }

        private fun fail(message: String): Nothing = throw Error("$message at offset $at")
    }
}
