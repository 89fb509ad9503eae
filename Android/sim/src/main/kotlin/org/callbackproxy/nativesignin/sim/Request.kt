package org.callbackproxy.nativesignin.sim

import org.callbackproxy.json.Json

/**
 * One request object whose fields are read with their types checked, and in which a field no
 * operation reads is an error (a misspelt field must not pass unnoticed).
 */
class Request(private val fields: Map<String, Any?>) {
    fun only(vararg allowed: String) {
        val extra = fields.keys.sorted().firstOrNull { it !in allowed }
        if (extra != null) throw SimError("unknown field \"$extra\"")
    }

    fun has(name: String): Boolean = fields[name] != null

    fun value(name: String): Any? = fields[name]

    fun string(name: String): String = optionalString(name) ?: throw SimError("$name is required")

    fun optionalString(name: String): String? {
        val value = fields[name] ?: return null
        return value as? String ?: throw SimError("$name must be a string")
    }

    fun bool(name: String): Boolean = optionalBool(name) ?: throw SimError("$name must be true or false")

    fun optionalBool(name: String): Boolean? {
        val value = fields[name] ?: return null
        return value as? Boolean ?: throw SimError("$name must be true or false")
    }

    /** An array of strings; absent is empty. */
    fun strings(name: String): List<String> {
        val value = fields[name] ?: return emptyList()
        val list = value as? List<*> ?: throw SimError("$name must be an array of strings")
        return list.map { it as? String ?: throw SimError("$name must be an array of strings") }
    }

    fun objects(name: String): List<Request> {
        val value = fields[name] ?: return emptyList()
        val list = value as? List<*> ?: throw SimError("$name must be an array")
        return list.map { of(it, name) }
    }

    /** The object as a plain map (BuildConfig values keep their JSON types). */
    fun map(name: String): Map<String, Any?> {
        val value = fields[name] ?: throw SimError("$name is required")
        @Suppress("UNCHECKED_CAST")
        return value as? Map<String, Any?> ?: throw SimError("$name must be an object")
    }

    companion object {
        fun parse(line: String): Request {
            val value = try {
                Json.parse(line)
            } catch (e: Json.Error) {
                throw SimError("a request is one JSON object on one line (${e.message})")
            }
            return of(value, "the request")
        }

        fun of(value: Any?, name: String): Request {
            @Suppress("UNCHECKED_CAST")
            return Request(value as? Map<String, Any?> ?: throw SimError("$name must be an object"))
        }
    }
}
