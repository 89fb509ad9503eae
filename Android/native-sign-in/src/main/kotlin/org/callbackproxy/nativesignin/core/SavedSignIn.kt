package org.callbackproxy.nativesignin.core

/**
 * What an activity keeps of the flow across its own recreation (Android's saved instance state):
 * how many sessions were started, the running sign-in (number, state, and its provider — or, for
 * a hand-back sign-in, the site's URL it opened, from which its callback is found again), and
 * every launch whose result has not arrived yet (number and state), oldest first. No code and no
 * PKCE verifier: the platform returns those with the result ([LaunchResult]).
 *
 * [encoded] is one short string for `Bundle.putString`; [decode] of anything else — absent,
 * another version, damaged — is null, and the flow then starts with nothing, as after a process
 * restart without saved state.
 */
class SavedSignIn internal constructor(
    internal val started: Int,
    internal val running: Running?,
    internal val launches: List<Launch>
) {
    /** Exactly one of [provider] (native) and [site] (hand-back). */
    internal class Running(val number: Int, val state: String, val provider: String?, val site: String?)
    internal class Launch(val number: Int, val state: String)

    val encoded: String
        get() {
            val fields = arrayListOf(QueryString.Field("v", VERSION), QueryString.Field("started", started.toString()))
            running?.let {
                fields.add(QueryString.Field("running", it.number.toString()))
                fields.add(QueryString.Field("state", it.state))
                it.provider?.let { name -> fields.add(QueryString.Field("provider", name)) }
                it.site?.let { url -> fields.add(QueryString.Field("site", url)) }
            }
            for (launch in launches) fields.add(QueryString.Field("launch", "${launch.number}:${launch.state}"))
            return QueryString.encode(fields)
        }

    override fun toString() = encoded

    companion object {
        /** The saved-state key the glue uses. */
        const val KEY = "org.callbackproxy.nativesignin.SavedSignIn"
        private const val VERSION = "1"

        fun decode(text: String?): SavedSignIn? {
            if (text == null) return null
            val values = HashMap<String, String>()
            val launches = ArrayList<Launch>()
            for (field in QueryString.fields(text)) {
                val value = field.value ?: return null
                if (field.name == "launch") {
                    val colon = value.indexOf(':')
                    if (colon < 0) return null
                    val number = positive(value.substring(0, colon)) ?: return null
                    val state = value.substring(colon + 1)
                    if (state.isEmpty()) return null
                    launches.add(Launch(number, state))
                } else if (values.put(field.name, value) != null) {
                    return null
                }
            }
            if (values["v"] != VERSION) return null
            val started = values["started"]?.let { if (it == "0") 0 else positive(it) } ?: return null
            val runningNumber = values["running"]
            val running = if (runningNumber == null) null else {
                val number = positive(runningNumber) ?: return null
                val state = values["state"]?.takeIf { it.isNotEmpty() } ?: return null
                val provider = values["provider"]
                val site = values["site"]
                if ((provider == null) == (site == null)) return null
                Running(number, state, provider, site)
            }
            if (launches.any { it.number > started } || (running != null && running.number > started)) return null
            return SavedSignIn(started, running, launches)
        }

        private fun positive(text: String): Int? =
            if (text.isEmpty() || text.length > 9 || !text.all { it in '0'..'9' } || text[0] == '0') null else text.toInt()
    }
}
