package org.callbackproxy.nativesignin.core

import org.callbackproxy.json.Json
import java.io.File

/**
 * Contract/native-sign-in-vectors.json (format: Contract/README.md), found by walking up from the
 * working directory — the repository root under scripts/test-android, the module directory under
 * Gradle — so that no build passes a path.
 */
object Vectors {
    const val PATH = "Contract/native-sign-in-vectors.json"

    val document: Map<String, Any?> by lazy {
        var dir: File? = File("").absoluteFile
        while (dir != null && !File(dir, PATH).isFile) dir = dir.parentFile
        val file = File(dir ?: throw AssertionError("$PATH not found above ${File("").absolutePath}"), PATH)
        @Suppress("UNCHECKED_CAST")
        Json.parse(file.readText()) as Map<String, Any?>
    }

    val codeVerifier: String get() = document.string("code_verifier")
    val codeChallenge: String get() = document.string("code_challenge")
    val platform: Platform get() = Platform.values().first { it.wireName == document.string("platform") }

    val providers: List<Provider>
        get() = document.objects("providers").map { p ->
            when (p.string("kind")) {
                "google" -> Provider.google(p.string("client_id"), p.string("reversed_client_id"))
                "facebook" -> Provider.facebook(p.string("app_id"))
                "oidc" -> oidc(p)
                else -> throw AssertionError("unknown provider kind in ${p}")
            }
        }

    fun oidc(p: Map<String, Any?>) = Provider.oidc(p.string("name"), p.string("authorization_endpoint"),
        p.string("client_id"), p.string("redirect_uri"), p["pkce"] as Boolean)

    /** The vectors' interceptor, with the fixed verifier. */
    fun interceptor(callbackPath: String = document.string("callback_path")) =
        SignInInterceptor(providers, platform, callbackPath) { Pkce(codeVerifier) }

    fun section(name: String): List<Map<String, Any?>> = document.objects(name)

    fun result(r: Map<String, Any?>): BrowserResult = when (r.string("kind")) {
        "redirect" -> BrowserResult.Redirect(r.string("url"))
        "cancelled" -> BrowserResult.Cancelled
        "failed" -> BrowserResult.Failed("vector")
        else -> throw AssertionError("unknown result kind in $r")
    }

    fun Map<String, Any?>.string(key: String): String = this[key] as? String ?: throw AssertionError("$key is not a string in $this")
    fun Map<String, Any?>.optionalString(key: String): String? = this[key] as String?
    @Suppress("UNCHECKED_CAST")
    fun Map<String, Any?>.obj(key: String): Map<String, Any?> = this[key] as Map<String, Any?>
    @Suppress("UNCHECKED_CAST")
    fun Map<String, Any?>.objects(key: String): List<Map<String, Any?>> = (this[key] as List<Any?>?).orEmpty().map { it as Map<String, Any?> }
}
