// bench/probes/h3load.c — an HTTP/3 load client for bench/http3, on the same Debian libraries as
// the proxy (ngtcp2 with its GnuTLS helper, nghttp3): Debian's h2load is built without QUIC, and
// aioquic (Python) is far slower than the servers it would measure.
//
// One thread, CONNECTIONS QUIC connections, each keeping STREAMS GET requests in flight for
// DURATION seconds; then the requests in flight finish. Its output copies h2load's lines that
// bench/measure.py reads ("finished in …, N req/s", "requests: …", "status codes: …", and with
// --log-file one line per request: start µs, status, duration µs), so it is measured like h2load;
// its own CPU time is printed too, to show it was not the bottleneck.
//
//   cc -O2 -o h3load h3load.c -lngtcp2 -lngtcp2_crypto_gnutls -lgnutls -lnghttp3
//   h3load -D SECONDS -c CONNECTIONS -m STREAMS [--log-file FILE] [--idle] https://HOST:PORT/PATH
//
// --idle: each connection makes one request, then holds its connection open and quiet until
// DURATION ends (what an idle client costs the server: bench/http3's memory row).
//
// The server's certificate is not verified (a benchmark on loopback).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <netdb.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_PACKET 1452

typedef struct request {
    uint64_t start;
    int status;
} request;

typedef struct conn {
    int fd;
    struct sockaddr_storage local, remote;
    socklen_t locallen, remotelen;
    ngtcp2_conn *q;
    gnutls_session_t tls;
    nghttp3_conn *h3;
    ngtcp2_crypto_conn_ref ref;
    int inflight;
    int sent;   // requests made on it
    int ready;  // HTTP/3 set up: requests may be sent
    int dead;
} conn;

static const char *authority, *path;
static int streams_per_conn;
static int stopping;
static int idle;
static uint64_t started_ns;
static long total, done, succeeded, failed, errored, status_class[6];
static FILE *log_file;
static gnutls_certificate_credentials_t credentials;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void random_bytes(uint8_t *dest, size_t n) { gnutls_rnd(GNUTLS_RND_RANDOM, dest, n); }

static void finish_request(request *r, int ok) {
    uint64_t end = now_ns();
    done++;
    if (ok && r->status >= 200 && r->status < 300) succeeded++;
    else if (ok) failed++;
    else errored++;
    if (r->status >= 100 && r->status < 600) status_class[r->status / 100]++;
    if (log_file)
        fprintf(log_file, "%llu\t%d\t%llu\n", (unsigned long long)((r->start - started_ns) / 1000), r->status,
                (unsigned long long)((end - r->start) / 1000));
    free(r);
}

// --- nghttp3 ------------------------------------------------------------------------------------

static int h3_recv_header(nghttp3_conn *h3, int64_t id, int32_t token, nghttp3_rcbuf *name, nghttp3_rcbuf *value,
                          uint8_t flags, void *user, void *stream_user) {
    (void)h3; (void)id; (void)name; (void)flags; (void)user;
    if (token == NGHTTP3_QPACK_TOKEN__STATUS && stream_user) {
        nghttp3_vec v = nghttp3_rcbuf_get_buf(value);
        ((request *)stream_user)->status = atoi((const char *)v.base);  // 3 digits, then a NUL or not: atoi stops
        if (v.len == 3) ((request *)stream_user)->status = (v.base[0] - '0') * 100 + (v.base[1] - '0') * 10 + (v.base[2] - '0');
    }
    return 0;
}

static int h3_recv_data(nghttp3_conn *h3, int64_t id, const uint8_t *data, size_t len, void *user, void *stream_user) {
    (void)h3; (void)data; (void)stream_user;
    conn *c = user;
    ngtcp2_conn_extend_max_stream_offset(c->q, id, len);
    ngtcp2_conn_extend_max_offset(c->q, len);
    return 0;
}

static int h3_deferred_consume(nghttp3_conn *h3, int64_t id, size_t consumed, void *user, void *stream_user) {
    (void)h3; (void)stream_user;
    conn *c = user;
    ngtcp2_conn_extend_max_stream_offset(c->q, id, consumed);
    ngtcp2_conn_extend_max_offset(c->q, consumed);
    return 0;
}

static int h3_stream_close(nghttp3_conn *h3, int64_t id, uint64_t code, void *user, void *stream_user) {
    (void)h3; (void)id;
    conn *c = user;
    if (stream_user) {
        c->inflight--;
        finish_request(stream_user, code == NGHTTP3_H3_NO_ERROR);
    }
    return 0;
}

static int setup_h3(conn *c) {
    nghttp3_callbacks cb = {0};
    cb.recv_header = h3_recv_header;
    cb.recv_data = h3_recv_data;
    cb.deferred_consume = h3_deferred_consume;
    cb.stream_close = h3_stream_close;
    nghttp3_settings settings;
    nghttp3_settings_default(&settings);
    settings.qpack_max_dtable_capacity = 0;
    settings.qpack_blocked_streams = 0;
    if (nghttp3_conn_client_new(&c->h3, &cb, &settings, NULL, c) != 0) return -1;
    int64_t control, enc, dec;
    if (ngtcp2_conn_open_uni_stream(c->q, &control, NULL) != 0 || nghttp3_conn_bind_control_stream(c->h3, control) != 0 ||
        ngtcp2_conn_open_uni_stream(c->q, &enc, NULL) != 0 || ngtcp2_conn_open_uni_stream(c->q, &dec, NULL) != 0 ||
        nghttp3_conn_bind_qpack_streams(c->h3, enc, dec) != 0)
        return -1;
    c->ready = 1;
    return 0;
}

#define NV(n, v) { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP3_NV_FLAG_NONE }

static void submit_requests(conn *c) {
    while (c->ready && !c->dead && !stopping && c->inflight < streams_per_conn && !(idle && c->sent > 0)) {
        int64_t id;
        if (ngtcp2_conn_open_bidi_stream(c->q, &id, NULL) != 0) return;  // stream credit spent: later
        request *r = calloc(1, sizeof *r);
        r->start = now_ns();
        nghttp3_nv nva[] = { NV(":method", "GET"), NV(":scheme", "https"), NV(":authority", authority), NV(":path", path),
                             NV("user-agent", "h3load") };
        if (nghttp3_conn_submit_request(c->h3, id, nva, 5, NULL, r) != 0) {
            free(r);
            return;
        }
        c->inflight++;
        c->sent++;
        total++;
    }
}

// --- ngtcp2 -------------------------------------------------------------------------------------

static conn *of(void *user) { return user; }

static void rand_cb(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx) { (void)ctx; random_bytes(dest, len); }

static int new_cid(ngtcp2_conn *q, ngtcp2_cid *cid, uint8_t *token, size_t len, void *user) {
    (void)q; (void)user;
    random_bytes(cid->data, len);
    cid->datalen = len;
    random_bytes(token, NGTCP2_STATELESS_RESET_TOKENLEN);
    return 0;
}

static int recv_stream_data(ngtcp2_conn *q, uint32_t flags, int64_t id, uint64_t offset, const uint8_t *data, size_t len,
                            void *user, void *stream_user) {
    (void)offset; (void)stream_user;
    conn *c = of(user);
    if (!c->h3) return 0;
    nghttp3_ssize n = nghttp3_conn_read_stream(c->h3, id, data, len, flags & NGTCP2_STREAM_DATA_FLAG_FIN);
    if (n < 0) return NGTCP2_ERR_CALLBACK_FAILURE;
    ngtcp2_conn_extend_max_stream_offset(q, id, (uint64_t)n);
    ngtcp2_conn_extend_max_offset(q, (uint64_t)n);
    return 0;
}

static int acked_offset(ngtcp2_conn *q, int64_t id, uint64_t offset, uint64_t len, void *user, void *stream_user) {
    (void)q; (void)offset; (void)stream_user;
    conn *c = of(user);
    return c->h3 && nghttp3_conn_add_ack_offset(c->h3, id, len) != 0 ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int stream_close(ngtcp2_conn *q, uint32_t flags, int64_t id, uint64_t code, void *user, void *stream_user) {
    (void)q; (void)stream_user;
    conn *c = of(user);
    if (!c->h3) return 0;
    if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET)) code = NGHTTP3_H3_NO_ERROR;
    int rv = nghttp3_conn_close_stream(c->h3, id, code);
    return rv == 0 || rv == NGHTTP3_ERR_STREAM_NOT_FOUND ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int stream_reset(ngtcp2_conn *q, int64_t id, uint64_t size, uint64_t code, void *user, void *stream_user) {
    (void)q; (void)size; (void)code; (void)stream_user;
    conn *c = of(user);
    return c->h3 && nghttp3_conn_shutdown_stream_read(c->h3, id) != 0 ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int extend_stream_data(ngtcp2_conn *q, int64_t id, uint64_t max, void *user, void *stream_user) {
    (void)q; (void)max; (void)stream_user;
    conn *c = of(user);
    return c->h3 && nghttp3_conn_unblock_stream(c->h3, id) != 0 ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int handshake_completed(ngtcp2_conn *q, void *user) {
    (void)q;
    return setup_h3(of(user)) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref) { return ((conn *)ref->user_data)->q; }

static ngtcp2_path path_of(conn *c) {
    ngtcp2_path p = { { (struct sockaddr *)&c->local, c->locallen }, { (struct sockaddr *)&c->remote, c->remotelen }, NULL };
    return p;
}

static int open_conn(conn *c, const struct addrinfo *ai) {
    memset(c, 0, sizeof *c);
    c->fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0 || connect(c->fd, ai->ai_addr, ai->ai_addrlen) != 0) return -1;
    int size = 4 << 20;
    setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    memcpy(&c->remote, ai->ai_addr, ai->ai_addrlen);
    c->remotelen = ai->ai_addrlen;
    c->locallen = sizeof c->local;
    getsockname(c->fd, (struct sockaddr *)&c->local, &c->locallen);

    ngtcp2_callbacks cb = {0};
    cb.client_initial = ngtcp2_crypto_client_initial_cb;
    cb.recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
    cb.encrypt = ngtcp2_crypto_encrypt_cb;
    cb.decrypt = ngtcp2_crypto_decrypt_cb;
    cb.hp_mask = ngtcp2_crypto_hp_mask_cb;
    cb.recv_retry = ngtcp2_crypto_recv_retry_cb;
    cb.update_key = ngtcp2_crypto_update_key_cb;
    cb.delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
    cb.delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
    cb.get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
    cb.version_negotiation = ngtcp2_crypto_version_negotiation_cb;
    cb.rand = rand_cb;
    cb.get_new_connection_id = new_cid;
    cb.recv_stream_data = recv_stream_data;
    cb.acked_stream_data_offset = acked_offset;
    cb.stream_close = stream_close;
    cb.stream_reset = stream_reset;
    cb.extend_max_stream_data = extend_stream_data;
    cb.handshake_completed = handshake_completed;

    ngtcp2_settings settings;
    ngtcp2_settings_default(&settings);
    settings.initial_ts = now_ns();
    settings.max_tx_udp_payload_size = MAX_PACKET;
    ngtcp2_transport_params params;
    ngtcp2_transport_params_default(&params);
    params.initial_max_stream_data_bidi_local = 4 << 20;
    params.initial_max_stream_data_uni = 1 << 20;
    params.initial_max_data = 64 << 20;
    params.initial_max_streams_uni = 3;
    params.max_idle_timeout = 30 * NGTCP2_SECONDS;
    ngtcp2_cid dcid, scid;
    dcid.datalen = 18;
    random_bytes(dcid.data, dcid.datalen);
    scid.datalen = 17;
    random_bytes(scid.data, scid.datalen);
    ngtcp2_path p = path_of(c);
    if (ngtcp2_conn_client_new(&c->q, &dcid, &scid, &p, NGTCP2_PROTO_VER_V1, &cb, &settings, &params, NULL, c) != 0) return -1;

    if (gnutls_init(&c->tls, GNUTLS_CLIENT | GNUTLS_NO_END_OF_EARLY_DATA) != 0 ||
        gnutls_priority_set_direct(c->tls, "%DISABLE_TLS13_COMPAT_MODE:NORMAL:-VERS-ALL:+VERS-TLS1.3", NULL) != 0 ||
        ngtcp2_crypto_gnutls_configure_client_session(c->tls) != 0 ||
        gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, credentials) != 0)
        return -1;
    gnutls_datum_t alpn = { (unsigned char *)"h3", 2 };
    gnutls_alpn_set_protocols(c->tls, &alpn, 1, GNUTLS_ALPN_MANDATORY);
    gnutls_server_name_set(c->tls, GNUTLS_NAME_DNS, "localhost", 9);
    c->ref.get_conn = get_conn;
    c->ref.user_data = c;
    gnutls_session_set_ptr(c->tls, &c->ref);
    ngtcp2_conn_set_tls_native_handle(c->q, c->tls);
    return 0;
}

static void kill_conn(conn *c, const char *why) {
    if (c->dead) return;
    c->dead = 1;
    fprintf(stderr, "connection ended: %s (%d requests in flight)\n", why, c->inflight);
    errored += c->inflight;
    done += c->inflight;
    c->inflight = 0;
}

static void write_conn(conn *c) {
    if (c->dead) return;
    uint8_t buf[MAX_PACKET];
    uint64_t ts = now_ns();
    // Up to 64 packets a turn; a packet ngtcp2 is still filling (WRITE_MORE) is always finished
    // first (its expiry handling asserts there is none pending).
    for (int packets = 0; packets < 64;) {
        int64_t id = -1;
        int fin = 0;
        nghttp3_vec vec[16];
        nghttp3_ssize count = 0;
        if (c->h3 && ngtcp2_conn_get_max_data_left(c->q)) {
            count = nghttp3_conn_writev_stream(c->h3, &id, &fin, vec, 16);
            if (count < 0) return kill_conn(c, "nghttp3_conn_writev_stream");
        }
        uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0);
        ngtcp2_ssize written = -1;
        ngtcp2_path_storage ps;
        ngtcp2_path_storage_zero(&ps);
        ngtcp2_pkt_info pi;
        ngtcp2_ssize n = ngtcp2_conn_writev_stream(c->q, &ps.path, &pi, buf, sizeof buf, &written, flags, id,
                                                   (const ngtcp2_vec *)vec, (size_t)count, ts);
        if (n < 0) {
            if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) { nghttp3_conn_block_stream(c->h3, id); continue; }
            if (n == NGTCP2_ERR_STREAM_SHUT_WR) { nghttp3_conn_shutdown_stream_write(c->h3, id); continue; }
            if (n == NGTCP2_ERR_WRITE_MORE) { nghttp3_conn_add_write_offset(c->h3, id, (size_t)written); continue; }
            return kill_conn(c, ngtcp2_strerror((int)n));
        }
        if (written >= 0 && c->h3) nghttp3_conn_add_write_offset(c->h3, id, (size_t)written);
        if (n == 0) break;
        if (send(c->fd, buf, (size_t)n, 0) < 0 && errno != EAGAIN) return kill_conn(c, "send");
        packets++;
    }
    ngtcp2_conn_update_pkt_tx_time(c->q, ts);
}

static void read_conn(conn *c) {
    uint8_t buf[65536];
    for (int i = 0; i < 64 && !c->dead; i++) {
        ssize_t n = recv(c->fd, buf, sizeof buf, 0);
        if (n < 0) return;
        ngtcp2_path p = path_of(c);
        ngtcp2_pkt_info pi = {0};
        int rv = ngtcp2_conn_read_pkt(c->q, &p, &pi, buf, (size_t)n, now_ns());
        if (rv != 0) return kill_conn(c, ngtcp2_strerror(rv));
    }
}

int main(int argc, char **argv) {
    int seconds = 10, connections = 1;
    streams_per_conn = 1;
    const char *url = NULL, *log_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-D") && i + 1 < argc) seconds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-c") && i + 1 < argc) connections = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-m") && i + 1 < argc) streams_per_conn = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--log-file") && i + 1 < argc) log_path = argv[++i];
        else if (!strcmp(argv[i], "--idle")) idle = 1;
        else if (!strncmp(argv[i], "https://", 8)) url = argv[i];
        else { fprintf(stderr, "usage: h3load -D SECONDS -c CONNECTIONS -m STREAMS [--log-file F] [--idle] https://HOST:PORT/PATH\n"); return 2; }
    }
    if (!url) { fprintf(stderr, "no URL\n"); return 2; }
    // https://HOST:PORT/PATH
    static char host[256], port[16], auth[300];
    const char *h = url + 8, *slash = strchr(h, '/'), *colon = strchr(h, ':');
    if (!colon || (slash && colon > slash)) { fprintf(stderr, "the URL needs a port\n"); return 2; }
    snprintf(host, sizeof host, "%.*s", (int)(colon - h), h);
    snprintf(port, sizeof port, "%.*s", (int)((slash ? slash : h + strlen(h)) - colon - 1), colon + 1);
    snprintf(auth, sizeof auth, "%.*s", (int)((slash ? slash : h + strlen(h)) - h), h);
    authority = auth;
    path = slash ? slash : "/";
    if (log_path && !(log_file = fopen(log_path, "w"))) { perror(log_path); return 2; }

    struct rlimit nofile;  // one socket a connection: as many as the hard limit allows
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) { nofile.rlim_cur = nofile.rlim_max; setrlimit(RLIMIT_NOFILE, &nofile); }
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM }, *ai;
    if (getaddrinfo(strcmp(host, "localhost") ? host : "127.0.0.1", port, &hints, &ai) != 0) { fprintf(stderr, "cannot resolve %s\n", host); return 2; }
    gnutls_certificate_allocate_credentials(&credentials);
    conn *conns = calloc((size_t)connections, sizeof *conns);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    started_ns = now_ns();
    for (int i = 0; i < connections; i++) {
        if (open_conn(&conns[i], ai) != 0) { fprintf(stderr, "cannot open connection %d\n", i); return 1; }
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
        epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev);
        write_conn(&conns[i]);
    }
    uint64_t stop_at = started_ns + (uint64_t)seconds * 1000000000u, give_up = stop_at + 10ull * 1000000000u;
    struct epoll_event events[256];
    for (;;) {
        uint64_t now = now_ns();
        if (!stopping && now >= stop_at) stopping = 1;
        int busy = 0;
        uint64_t next = now + 100000000u;
        for (int i = 0; i < connections; i++) {
            conn *c = &conns[i];
            if (c->dead) continue;
            if (!stopping || c->inflight) busy = 1;
            uint64_t e = ngtcp2_conn_get_expiry(c->q);
            if (e < next) next = e;
        }
        if (stopping && (!busy || now >= give_up)) break;
        int wait_ms = next > now ? (int)((next - now + 999999) / 1000000) : 0;
        int n = epoll_wait(ep, events, 256, wait_ms);
        for (int k = 0; k < n; k++) read_conn(&conns[events[k].data.u32]);
        now = now_ns();
        for (int i = 0; i < connections; i++) {
            conn *c = &conns[i];
            if (c->dead) continue;
            if (ngtcp2_conn_get_expiry(c->q) <= now) {
                int rv = ngtcp2_conn_handle_expiry(c->q, now);
                if (rv != 0) { kill_conn(c, ngtcp2_strerror(rv)); continue; }
            }
            submit_requests(c);
            write_conn(c);
        }
    }
    // CONNECTION_CLOSE (H3_NO_ERROR) on every connection still open, so that the server frees it
    // now rather than at its idle timeout.
    for (int i = 0; i < connections; i++) {
        conn *c = &conns[i];
        if (c->dead) continue;
        uint8_t buf[MAX_PACKET];
        ngtcp2_connection_close_error ccerr;
        ngtcp2_connection_close_error_set_application_error(&ccerr, NGHTTP3_H3_NO_ERROR, NULL, 0);
        ngtcp2_path_storage ps;
        ngtcp2_path_storage_zero(&ps);
        ngtcp2_pkt_info pi;
        ngtcp2_ssize n = ngtcp2_conn_write_connection_close(c->q, &ps.path, &pi, buf, sizeof buf, &ccerr, now_ns());
        if (n > 0) send(c->fd, buf, (size_t)n, 0);
    }
    double elapsed = (double)(now_ns() - started_ns) / 1e9;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    printf("finished in %.2fs, %.2f req/s\n", elapsed, (double)succeeded / elapsed);
    printf("requests: %ld total, %ld started, %ld done, %ld succeeded, %ld failed, %ld errored, 0 timeout\n",
           total, total, done, succeeded, failed, errored);
    printf("status codes: %ld 2xx, %ld 3xx, %ld 4xx, %ld 5xx\n", status_class[2], status_class[3], status_class[4], status_class[5]);
    printf("client cpu: %.2fs (%.0f%% of one core)\n", cpu, 100 * cpu / elapsed);
    if (log_file) fclose(log_file);
    return errored || failed ? 1 : 0;
}
