package org.callbackproxy.nativesignin.core

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.util.Random

class QueryStringTest {
    @Test
    fun readingIsFormDecodingAndKeepsOrderAndEmptyValues() {
        assertEquals(listOf(QueryString.RawField("scope", "openid email"), QueryString.RawField("flag", ""),
            QueryString.RawField("a b", "x=y")), QueryString.fields("scope=openid+email&&flag&a%20b=x=y"))
        assertEquals(emptyList<QueryString.RawField>(), QueryString.fields(null))
    }

    @Test
    fun malformedEscapesAndBytesThatAreNotUtf8DecodeToNull() {
        for (raw in listOf("%ZZ", "50%", "%4", "%FF", "%E0%A4", "%C3", "%ED%A0%80")) assertNull(QueryString.decode(raw), raw)
        assertEquals("é~", QueryString.decode("%C3%A9~"))
        assertEquals("\u0000", QueryString.decode("%00"))
    }

    @Test
    fun anUndecodableNameIsKeptAsWritten() {
        assertEquals(listOf(QueryString.RawField("%FF", "1")), QueryString.fields("%FF=1"))
    }

    @Test
    fun writingLeavesOnlyUnreservedCharactersAndReadsBackToTheSameText() {
        assertEquals("a%20b%2Bc~d%2Ae%21%27%28%29%2F%3A%C3%A9", QueryString.escape("a b+c~d*e!'()/:é"))
        val random = Random(7)
        repeat(2000) {
            val text = String(CharArray(random.nextInt(12)) { ' ' + random.nextInt(0x24F - 0x20) })
            val escaped = QueryString.escape(text)
            assertTrue(escaped.all { Ascii.isUnreserved(it) || it == '%' || it in '0'..'9' || it in 'A'..'F' }, escaped)
            assertEquals(text, QueryString.decode(escaped))
        }
    }
}
