# shellcheck shell=bash
# Shared by the bench/ scripts (sourced, not run): messages, prerequisites, the build, free
# ports, a temp dir whose processes are all stopped on exit, starting and waiting for a server,
# and the records file every measurement goes to (bench/measure.py) and the report made from it
# (bench/render.py). The sourcing script sets BENCH_NAME (bench/NAME, for messages) and REPO.
# RESULTS_DIR (default bench/results) is where the reports go: a trial run can write elsewhere.
RESULTS_DIR=${RESULTS_DIR:-$REPO/bench/results}
COMMAND="" # the settings that made this run, as a command line (setting, then the script's name)
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

# setting NAME DEFAULT [always]: NAME from the environment, or DEFAULT. COMMAND records it when it
# differs from DEFAULT (or always): every report starts with the command that made it.
setting() {
    printf -v "$1" '%s' "${!1:-$2}"
    [[ ${!1} != "$2" || -n ${3:-} ]] || return 0
    if [[ ${!1} == *" "* ]]; then COMMAND+="$1=\"${!1}\" "; else COMMAND+="$1=${!1} "; fi
}

need_venv() { # the project's .venv with PyJWT and cryptography (mint_token.py) -> VENV_PY
    VENV_PY=$REPO/.venv/bin/python
    "$VENV_PY" -c 'import jwt, cryptography' 2>/dev/null || "$REPO/scripts/setup" >&2 || die "scripts/setup failed"
}

log() { printf '== %s\n' "$*" >&2; }
die() { printf '%s: %s\n' "$BENCH_NAME" "$*" >&2; exit 1; }

# need_packages PKG...: installs the missing Debian packages (as root), or says which.
need_packages() {
    local missing=() pkg
    for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
    ((${#missing[@]})) || return 0
    [[ $(id -u) -eq 0 ]] || die "missing packages (${missing[*]}); run as root to install them"
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y "${missing[@]}" >/dev/null 2>&1 ||
        { apt-get update >/dev/null && apt-get install -y "${missing[@]}" >/dev/null; }
    # Debian's server packages start their system services; the benchmarks never use or touch them.
}

# build_proxy SCRATCH -> BIN: $CALLBACK_PROXY_BIN, or a release build kept apart from other builds.
build_proxy() {
    if [[ -n ${CALLBACK_PROXY_BIN:-} ]]; then
        BIN=$CALLBACK_PROXY_BIN
    else
        log "building callback-proxy (release, scratch path $1)"
        # Others edit the tree concurrently: "modified during the build" is retried.
        local build_log attempt
        build_log=$(mktemp /tmp/bench-build.XXXXXX)
        for attempt in 1 2 3 4 5; do
            if (cd "$REPO" && swift build -c release --product callback-proxy --scratch-path "$1") >"$build_log" 2>&1; then
                tail -1 "$build_log" >&2
                break
            fi
            if ((attempt == 5)) || ! grep -q 'was modified during the build' "$build_log"; then
                grep -E 'error:' "$build_log" | sort -u | head -20 >&2
                rm -f "$build_log"
                die "build failed (the tree may be mid-edit; CALLBACK_PROXY_BIN=... runs a binary you built)"
            fi
            log "a source file changed during the build (attempt $attempt); retrying in 5 s"
            sleep 5
        done
        rm -f "$build_log"
        BIN=$1/release/callback-proxy
    fi
    [[ -x $BIN ]] || die "no executable at $BIN"
}

# ports_free PORT...: dies naming the first one in use.
ports_free() {
    local p
    for p in "$@"; do
        if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || ss -Htln "sport = :$p" 2>/dev/null | grep -q .; then
            die "port $p is in use (set PORT_BASE to move the whole range)"
        fi
    done
}

# make_temp PREFIX -> T: a fresh temp dir; every PID added to PIDS is stopped on exit, and the
# dir is removed unless the run failed or KEEP_TMP=1.
make_temp() {
    T=$(mktemp -d "/tmp/$1.XXXXXX")
    chmod 755 "$T" # nginx workers may run as nobody
    mkdir -p "$T/ngx-tmp"
    RECORDS=$T/records.jsonl
    PIDS=()
    trap _bench_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

_bench_cleanup() {
    local rc=$? pid _
    trap - EXIT INT TERM
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [[ $rc -ne 0 || ${KEEP_TMP:-0} == 1 ]]; then
        echo "$BENCH_NAME: configs, logs and raw output kept in $T" >&2
    else
        rm -rf "$T"
    fi
    exit "$rc"
}

stop() { # stop PID: SIGTERM, wait, forget it
    local pid=$1 _
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    local keep=() p
    for p in "${PIDS[@]}"; do [[ $p == "$pid" ]] || keep+=("$p"); done
    PIDS=("${keep[@]}")
}

wait_http() { # wait_http URL PID NAME: until URL answers 200 (10 s)
    local _
    for _ in $(seq 200); do
        if [[ $(curl -sk -o /dev/null -w '%{http_code}' --max-time 1 "$1" 2>/dev/null) == 200 ]]; then return 0; fi
        kill -0 "$2" 2>/dev/null || die "$3 exited during start-up (logs in $T)"
        sleep 0.05
    done
    die "$3 did not answer $1 within 10 s (logs in $T)"
}

start() { # start NAME URL COMMAND...: COMMAND in the background (output in $T/NAME.out, .err)
    # until URL answers 200 -> LAST_PID. URL "-" waits for nothing.
    local name=$1 url=$2
    shift 2
    "$@" >"$T/$name.out" 2>"$T/$name.err" &
    LAST_PID=$!
    PIDS+=("$LAST_PID")
    [[ $url == - ]] || wait_http "$url" "$LAST_PID" "$name"
}

# alternate RUN KEY...: `RUN KEY warmup $WARMUP` for each KEY, then ROUNDS rounds of `RUN KEY ROUND
# $DURATION`, the order rotated each round: every variant measured side by side, none always first.
alternate() {
    local run=$1 keys=("${@:2}") k r i
    for k in "${keys[@]}"; do "$run" "$k" warmup "$WARMUP"; done
    for ((r = 1; r <= ROUNDS; r++)); do
        for ((i = 0; i < ${#keys[@]}; i++)); do "$run" "${keys[$(((i + r - 1) % ${#keys[@]}))]}" "$r" "$DURATION"; done
    done
}

measure() { # measure SUBCOMMAND ARGS...: bench/measure.py, appending to this run's records
    python3 "$REPO/bench/measure.py" "$1" --records "$RECORDS" --bench "${BENCH_NAME#bench/}" "${@:2}"
}

render() { # render OUT.md|-: the report from the records, to stdout (and RESULTS_DIR/OUT.md)
    local out=()
    [[ $1 == - ]] || { mkdir -p "$RESULTS_DIR" && out=(--out "$RESULTS_DIR/$1"); }
    python3 "$REPO/bench/render.py" "${BENCH_NAME#bench/}" "$RECORDS" "${out[@]}"
}

# nginx_conf NAME WORKERS CONNECTIONS HTTP...: $T/NAME.conf (checked) with HTTP as its http block, temp
# files under $T; NGINX_MAIN=... adds main-context directives. nginx_start NAME URL starts it.
nginx_conf() {
    cat >"$T/$1.conf" <<EOF
worker_processes $2; ${NGINX_MAIN:-} daemon off; pid $T/$1.pid; error_log $T/$1-error.log warn;
events { worker_connections $3; }
http { client_body_temp_path $T/ngx-tmp/$1-b; proxy_temp_path $T/ngx-tmp/$1-p; fastcgi_temp_path $T/ngx-tmp/$1-f;
       uwsgi_temp_path $T/ngx-tmp/$1-u; scgi_temp_path $T/ngx-tmp/$1-s;
       ${*:4} }
EOF
    "$NGINX" -t -q -p "$T" -e "$T/$1-error.log" -c "$T/$1.conf" || die "nginx rejects $T/$1.conf"
}
nginx_start() { start "$1" "$2" "$NGINX" -p "$T" -e "$T/$1-error.log" -c "$T/$1.conf"; }
