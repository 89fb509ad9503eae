#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include "include/CProxyLinux.h"

int CProxyLinux_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
    return accept4(fd, addr, len, flags);
}

int CProxyLinux_errno(void) { return errno; }

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
