package org.callbackproxy.json

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Test

class JsonTest {
    @Test
    fun everyKindOfValueIsRead() {
        val value = Json.parse(""" { "a": [1, -2.5e1, true, false, null, "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"], "b": {} , "c": 0 } """)
        assertEquals(mapOf("a" to listOf(1L, -25.0, true, false, null, "x\"\\/\b\u000C\n\r\té\uD83D\uDE00"), "b" to emptyMap<String, Any?>(),
            "c" to 0L), value)
    }

    @Test
    fun anythingOutsideTheGrammarIsRefused() {
        val bad = listOf("", " ", "{", "[1,]", "{\"a\":1,}", "{'a':1}", "// c\n1", "01", "1.", ".5", "-", "+1", "1e", "tru", "nul",
            "\"a", "\"\u0001\"", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"", "\"\\udc00x\"", "[1] 2", "{\"a\":1 \"b\":2}",
            "{\"a\":1,\"a\":2}", "NaN", "[" .repeat(70) + "]".repeat(70), "\"\uD800\"")
        for (text in bad) assertThrows(Json.Error::class.java, { Json.parse(text) }, text)
    }

    @Test
    fun writingSortsKeysAndEscapesOnlyWhatJsonRequires() {
        val text = Json.write(mapOf("z" to null, "a" to listOf(true, 3, "é/\"\\\n\u0001"), "m" to mapOf("k" to false)))
        assertEquals("""{"a":[true,3,"é/\"\\\n\u0001"],"m":{"k":false},"z":null}""", text)
        assertEquals(mapOf("z" to null, "a" to listOf(true, 3L, "é/\"\\\n\u0001"), "m" to mapOf("k" to false)), Json.parse(text))
    }
}
