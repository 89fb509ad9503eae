// bench/probes/iouring.c — does io_uring win over epoll on this kernel, for the shapes of traffic
// where system calls weigh most? (issue 25, item 7)
//
// A minimal HTTP/1.1 server, the same in two I/O models, so that the difference between them is
// the I/O model alone:
//   epoll  — level-triggered epoll, accept4 until EAGAIN, read(2)/write(2)/close(2), one
//            epoll_ctl a connection: the pattern of callback-proxy's engine and of nginx.
//   uring  — one ring a thread (SINGLE_ISSUER | DEFER_TASKRUN), multishot accept, multishot
//            recv into a provided-buffer ring, send and close as ring operations: no system
//            call but io_uring_enter, which submits and waits in one.
//   uring-fixed — the same with registered descriptors (accepted straight into the ring's file
//            table): no descriptor lookup per operation either. io_uring at its best here.
// Each thread has its own SO_REUSEPORT listener. Every request (a head without a body) gets
// a fixed 1 KiB response; a request with "Connection: close" gets it and the connection is
// closed. With no upstream leg and no parsing to speak of, the system calls are the largest
// share of the work they will ever be: whatever io_uring saves here is the most it could save
// in the proxy, where the same calls sit among parsing, an upstream round trip and TLS.
//
// Driven by bench/iouring, which builds it: cc -O2 -o probe iouring.c -luring -lpthread; probe epoll|uring|uring-fixed PORT THREADS
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_FD 65536
#define BODY 1024

static char keep[256 + BODY], closing[256 + BODY];
static int keep_len, closing_len;
static int port;

// Per-descriptor request bytes not yet answered (a head split across reads).
struct conn { unsigned short len; unsigned char closing; unsigned gen; char buf[2048]; };
static __thread struct conn *conns;

static int listener(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // inherited by accepted sockets
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 4096)) { perror("bind/listen"); exit(1); }
    return fd;
}

// Appends `n` bytes to the connection's pending head; returns how many whole requests it now
// holds and whether one of them asked to close. The answered ones are dropped.
static int take_requests(struct conn *c, const char *p, int n, int *close_after) {
    if (c->len + n > (int)sizeof c->buf) { *close_after = 1; c->len = 0; return 0; }
    memcpy(c->buf + c->len, p, n);
    c->len += n;
    int count = 0, at = 0;
    char *end;
    while ((end = memmem(c->buf + at, c->len - at, "\r\n\r\n", 4))) {
        if (memmem(c->buf + at, end - (c->buf + at), "Connection: close", 17)) *close_after = 1;
        at = end + 4 - c->buf;
        count++;
    }
    memmove(c->buf, c->buf + at, c->len - at);
    c->len -= at;
    return count;
}

// ---- epoll -----------------------------------------------------------------------------------

static void *epoll_thread(void *unused) {
    (void)unused;
    conns = calloc(MAX_FD, sizeof *conns);
    int lfd = listener(), ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = lfd }, evs[256];
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    char in[4096];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == lfd) {
                int c;
                while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    if (c >= MAX_FD) { close(c); continue; }
                    conns[c].len = 0;
                    struct epoll_event e = { .events = EPOLLIN | EPOLLRDHUP, .data.fd = c };
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &e);
                }
                continue;
            }
            ssize_t r = read(fd, in, sizeof in);
            if (r < 0 && errno == EAGAIN) continue;
            int close_after = r <= 0;
            int count = r > 0 ? take_requests(&conns[fd], in, (int)r, &close_after) : 0;
            for (int k = 0; k < count; k++) {
                const char *resp = close_after && k == count - 1 ? closing : keep;
                int len = close_after && k == count - 1 ? closing_len : keep_len;
                // 1 KiB into an empty socket buffer: taken whole, or the client is gone.
                if (write(fd, resp, len) != len) { close_after = 1; break; }
            }
            if (close_after) close(fd);  // close(2) takes it out of the epoll set
        }
    }
    return NULL;
}

// ---- io_uring --------------------------------------------------------------------------------

enum { ACCEPT = 1, RECV = 2, SEND = 3, CLOSE = 4, CANCEL = 5 };
// A completion names its descriptor and that descriptor's generation: a number is reused as
// soon as a close has run, and completions for the old connection may still be in the queue.
#define TAG(kind, fd) (((unsigned long long)(kind) << 56) | ((unsigned long long)(conns[fd].gen & 0xffffff) << 32) | (unsigned)(fd))
#define BUFS 4096
#define BUF_SIZE 2048

static __thread struct io_uring ring;
static int fixed;  // uring-fixed: descriptors are indexes into the ring's file table
#define MAX_FIXED 16384
static __thread struct io_uring_buf_ring *br;
static __thread char *buf_base;

static struct io_uring_sqe *sqe(void) {
    struct io_uring_sqe *s = io_uring_get_sqe(&ring);
    if (!s) { io_uring_submit(&ring); s = io_uring_get_sqe(&ring); }
    return s;
}

static void arm_recv(int fd) {
    struct io_uring_sqe *s = sqe();
    io_uring_prep_recv_multishot(s, fd, NULL, 0, 0);
    s->flags |= IOSQE_BUFFER_SELECT | (fixed ? IOSQE_FIXED_FILE : 0);
    s->buf_group = 0;
    io_uring_sqe_set_data64(s, TAG(RECV, fd));
}

static void arm_accept(int lfd) {
    struct io_uring_sqe *s = sqe();
    if (fixed) io_uring_prep_multishot_accept_direct(s, lfd, NULL, NULL, 0);
    else io_uring_prep_multishot_accept(s, lfd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(s, TAG(ACCEPT, lfd));
}

static void cancel_and_close(int fd) {
    conns[fd].closing = 1;
    struct io_uring_sqe *s = sqe();
    io_uring_prep_cancel_fd(s, fd, IORING_ASYNC_CANCEL_ALL | (fixed ? IORING_ASYNC_CANCEL_FD_FIXED : 0));
    s->flags |= IOSQE_IO_HARDLINK;
    io_uring_sqe_set_data64(s, TAG(CANCEL, fd));
    s = sqe();
    if (fixed) io_uring_prep_close_direct(s, fd);
    else io_uring_prep_close(s, fd);
    io_uring_sqe_set_data64(s, TAG(CLOSE, fd));
}

// Send, then (linked, in order) cancel the armed recv — which holds the file open — and close.
static void send_and_close(int fd, const char *resp, int len, int close_after) {
    struct io_uring_sqe *s = sqe();
    io_uring_prep_send(s, fd, resp, len, MSG_NOSIGNAL);
    if (fixed) s->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(s, TAG(SEND, fd));
    if (!close_after) return;
    s->flags |= IOSQE_IO_HARDLINK;
    cancel_and_close(fd);
}

static void *uring_thread(void *unused) {
    (void)unused;
    conns = calloc(MAX_FD, sizeof *conns);
    struct io_uring_params p = { .flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN };
    int e = io_uring_queue_init_params(4096, &ring, &p);
    if (e) { fprintf(stderr, "io_uring_queue_init_params: %s\n", strerror(-e)); exit(1); }
    // Provided buffers: the kernel picks one for each recv completion; handed back after use.
    br = mmap(NULL, BUFS * sizeof(struct io_uring_buf), PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    buf_base = malloc((size_t)BUFS * BUF_SIZE);
    struct io_uring_buf_reg reg = { .ring_addr = (unsigned long)br, .ring_entries = BUFS, .bgid = 0 };
    if ((e = io_uring_register_buf_ring(&ring, &reg, 0))) { fprintf(stderr, "buf ring: %s\n", strerror(-e)); exit(1); }
    io_uring_buf_ring_init(br);
    int mask = io_uring_buf_ring_mask(BUFS);
    for (int i = 0; i < BUFS; i++) io_uring_buf_ring_add(br, buf_base + (size_t)i * BUF_SIZE, BUF_SIZE, i, mask, i);
    io_uring_buf_ring_advance(br, BUFS);

    if (fixed && (e = io_uring_register_files_sparse(&ring, MAX_FIXED))) { fprintf(stderr, "files: %s\n", strerror(-e)); exit(1); }
    int lfd = listener();
    arm_accept(lfd);
    for (;;) {
        struct io_uring_cqe *cqe;
        io_uring_submit_and_wait(&ring, 1);
        unsigned head, seen = 0, returned = 0;
        io_uring_for_each_cqe(&ring, head, cqe) {
            seen++;
            unsigned long long tag = io_uring_cqe_get_data64(cqe);
            int kind = (int)(tag >> 56), fd = (int)(tag & 0xffffffff), res = cqe->res;
            unsigned gen = (unsigned)(tag >> 32) & 0xffffff;
            int more = cqe->flags & IORING_CQE_F_MORE;
            switch (kind) {
            case ACCEPT:
                if (res >= 0) {
                    if (!fixed && res >= MAX_FD) { close(res); } else {
                        conns[res].len = 0;
                        conns[res].closing = 0;
                        conns[res].gen++;
                        arm_recv(res);
                    }
                }
                if (!more) arm_accept(lfd);
                break;
            case RECV: {
                // Cancelled before its close, closing, or an earlier connection's: not ours.
                if (res == -ECANCELED || conns[fd].closing || gen != (conns[fd].gen & 0xffffff)) {
                    if (res > 0) {  // its buffer goes back all the same
                        int bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
                        io_uring_buf_ring_add(br, buf_base + (size_t)bid * BUF_SIZE, BUF_SIZE, bid, mask, returned++);
                    }
                    break;
                }
                if (res <= 0) {
                    if (res == -ENOBUFS) { arm_recv(fd); break; }  // out of buffers: try again
                    cancel_and_close(fd);
                    break;
                }
                int bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT, close_after = 0;
                int count = take_requests(&conns[fd], buf_base + (size_t)bid * BUF_SIZE, res, &close_after);
                io_uring_buf_ring_add(br, buf_base + (size_t)bid * BUF_SIZE, BUF_SIZE, bid, mask, returned++);
                for (int k = 0; k < count; k++) {
                    int last = k == count - 1;
                    send_and_close(fd, last && close_after ? closing : keep, last && close_after ? closing_len : keep_len,
                                   last && close_after);
                }
                if (close_after && count == 0) cancel_and_close(fd);
                else if (!more && !close_after) arm_recv(fd);
                break;
            }
            default:
                break;  // SEND, CANCEL, CLOSE: nothing to do (a failed send's connection sees its recv fail)
            }
        }
        if (returned) io_uring_buf_ring_advance(br, returned);
        io_uring_cq_advance(&ring, seen);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: probe epoll|uring|uring-fixed PORT THREADS\n"); return 2; }
    port = atoi(argv[2]);
    int threads = atoi(argv[3]);
    char body[BODY];
    memset(body, 'x', sizeof body);
    keep_len = snprintf(keep, sizeof keep, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n", BODY);
    memcpy(keep + keep_len, body, BODY);
    keep_len += BODY;
    closing_len = snprintf(closing, sizeof closing, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", BODY);
    memcpy(closing + closing_len, body, BODY);
    closing_len += BODY;
    fixed = strcmp(argv[1], "uring-fixed") == 0;
    void *(*run)(void *) = strncmp(argv[1], "uring", 5) == 0 ? uring_thread : epoll_thread;
    pthread_t t[64];
    for (int i = 0; i < threads && i < 64; i++) pthread_create(&t[i], NULL, run, NULL);
    pthread_join(t[0], NULL);
    return 0;
}
