#define _GNU_SOURCE
#include <malloc.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/sendfile.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/syscall.h>
#include <linux/openat2.h>
#include "include/CProxyLinux.h"

int CProxyLinux_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
    return accept4(fd, addr, len, flags);
}

int CProxyLinux_errno(void) { return errno; }

long CProxyLinux_splice(int in, int out, size_t len) {
    return (long)splice(in, NULL, out, NULL, len, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
}

long CProxyLinux_splice_more(int in, int out, size_t len) {
    return (long)splice(in, NULL, out, NULL, len, SPLICE_F_NONBLOCK | SPLICE_F_MOVE | SPLICE_F_MORE);
}

int CProxyLinux_pipe(int fds[2]) { return pipe2(fds, O_NONBLOCK | O_CLOEXEC); }

int CProxyLinux_pipe_size(int fd) { return fcntl(fd, F_GETPIPE_SZ); }

int CProxyLinux_open_beneath(int dirfd, const char *path, int beneath) {
    struct open_how how = {
        .flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY,
        .resolve = RESOLVE_NO_MAGICLINKS | (beneath ? RESOLVE_BENEATH : 0),
    };
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

int CProxyLinux_open_directory(const char *path) { return open(path, O_PATH | O_DIRECTORY | O_CLOEXEC); }

long CProxyLinux_sendfile(int out, int in, int64_t *offset, size_t count) {
    off_t o = (off_t)*offset;
    ssize_t n = sendfile(out, in, &o, count);
    *offset = (int64_t)o;
    return (long)n;
}

static void fill(sigset_t *set, const int *signals, int count) {
    sigemptyset(set);
    for (int i = 0; i < count; i++) sigaddset(set, signals[i]);
}

int CProxyLinux_block_signals(const int *signals, int count) {
    sigset_t set;
    fill(&set, signals, count);
    return pthread_sigmask(SIG_BLOCK, &set, NULL);
}

int CProxyLinux_wait_signals(const int *signals, int count) {
    sigset_t set;
    fill(&set, signals, count);
    int sig = 0;
    if (sigwait(&set, &sig) != 0) return -1;
    return sig;
}

int CProxyLinux_limit_arenas(int arenas) { return mallopt(M_ARENA_MAX, arenas); }

int CProxyLinux_trim_heap(void) { return malloc_trim(0); }

void CProxyLinux_heap(size_t *in_use, size_t *held_free) {
    struct mallinfo2 info = mallinfo2();
    *in_use = info.uordblks + info.hblkhd;
    *held_free = info.fordblks;
}
