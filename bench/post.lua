-- wrk script for bench/run's matrix: every request is a POST /post with a body of SIZE bytes
-- (default 65536), which the proxy must stream to the upstream (the upstream reads all of it
-- before it answers). Usage:
--   wrk -t1 -c50 -d10s --latency -s bench/post.lua http://127.0.0.1:PORT/post [-- SIZE]

function init(args)
    local size = tonumber(args[1] or "65536")
    wrk.method = "POST"
    wrk.body = string.rep("x", size)
    wrk.headers["Content-Type"] = "application/octet-stream"
    -- wrk.format (called by wrk after init) adds Content-Length from the body.
end
