-- wrk script for bench/callbacks: every request is a complete, valid native callback
--   GET /_oauth_callback?provider=google&platform=ios&client_id=…&redirect_uri=…
--       &code=<unique>&state=s&code_verifier=<64 unreserved chars>
-- with a code never sent before (the proxy refuses a replayed code with 400), and counts the
-- response statuses per thread. Usage:
--   wrk -t1 -c50 -d10s -s bench/callbacks.lua http://127.0.0.1:PORT -- PREFIX [CLIENT_ID REDIRECT_URI]
-- PREFIX must differ between runs against the same proxy (its replay window outlives a run).
-- done() prints one "# status CODE COUNT" line per status seen (bench/measure.py counts them).

local threads = {}
local counter = 0

function setup(thread)
    thread:set("tid", #threads + 1)
    table.insert(threads, thread)
end

local function urlencode(s)
    return (s:gsub("[^A-Za-z0-9._~-]", function(c) return string.format("%%%02X", string.byte(c)) end))
end

local base

function init(args)
    local prefix = args[1] or tostring(os.time())
    local client_id = args[2] or "123-ios.apps.googleusercontent.com"
    local redirect_uri = args[3] or "com.googleusercontent.apps.123-ios:/oauth2redirect"
    -- RFC 7636: 43–128 characters of [A-Za-z0-9._~-].
    local verifier = "bench-verifier-0123456789abcdefghijklmnopqrstuvwxyz_ABCDEFGHIJ.~"
    base = "/_oauth_callback?provider=google&platform=ios&client_id=" .. urlencode(client_id)
        .. "&redirect_uri=" .. urlencode(redirect_uri)
        .. "&state=s&code_verifier=" .. verifier
        .. "&code=4%2F0A" .. urlencode(prefix) .. "-t" .. tostring(tid) .. "-"
    statuses = {}
end

function request()
    counter = counter + 1
    return wrk.format("GET", base .. tostring(counter))
end

function response(status, headers, body)
    statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
    local total = {}
    for _, thread in ipairs(threads) do
        -- thread:get copies the thread's table into this (main) Lua state.
        local s = thread:get("statuses")
        if s then
            for code, n in pairs(s) do total[code] = (total[code] or 0) + n end
        end
    end
    for code, n in pairs(total) do
        io.write(string.format("# status %d %d\n", code, n))
    end
end
