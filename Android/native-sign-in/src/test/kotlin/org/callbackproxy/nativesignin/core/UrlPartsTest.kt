package org.callbackproxy.nativesignin.core

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Test

class UrlPartsTest {
    @Test
    fun aUrlIsSplitAsWritten() {
        val parts = UrlParts.parse("HTTPS://u:p@Host.Example:8443/a%2Fb;c?x=%7B1%7D&y={2}#frag?x")!!
        assertEquals("HTTPS", parts.scheme)
        assertEquals("u:p", parts.userInfo)
        assertEquals("Host.Example", parts.host)
        assertEquals(8443, parts.port)
        assertEquals("/a%2Fb;c", parts.path)
        assertEquals("x=%7B1%7D&y={2}", parts.query)
        assertEquals("frag?x", parts.fragment)
        assertEquals("HTTPS://u:p@Host.Example:8443/a%2Fb;c", parts.withoutQuery)
    }

    @Test
    fun theHostFollowsTheLastAtSignAsInBrowsers() {
        assertEquals("evil.test", UrlParts.parse("https://a@accounts.google.com@evil.test/")!!.host)
    }

    @Test
    fun customSchemesIpv6AndAnEmptyPort() {
        val redirect = UrlParts.parse("com.example.app:/oauth2redirect?code=c")!!
        assertNull(redirect.host)
        assertEquals("/oauth2redirect", redirect.path)
        assertEquals("authorize", UrlParts.parse("fb4242://authorize?code=c")!!.host)
        val v6 = UrlParts.parse("http://[::1]:8080/x")!!
        assertEquals("[::1]", v6.host)
        assertEquals(8080, v6.port)
        assertNull(UrlParts.parse("https://site.example:/")!!.port)
    }

    @Test
    fun whatNoBrowserHandsOverIsNotAUrl() {
        for (text in listOf("https://evil.test\\@accounts.google.com/", "https://a b/", "https://é.example/", "https://h:99999/",
            "https://h:8a/", "https://[::1/", "https://h/\u0000", "https://[::1]x/")) {
            assertNull(UrlParts.parse(text), text)
        }
    }
}
