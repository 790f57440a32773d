/* Preloaded into every process of an emulated node (LD_PRELOAD, set by the node's sshd).
 *
 * Open MPI waits for messages by polling, and with mpi_yield_when_idle it calls sched_yield()
 * on every idle pass. On a host of its own that poll burns a core nobody else needs; on an
 * emulated node it burns the node's CPU budget, which then throttles the rank's own compute
 * and the copying of its data out of the socket. Here an idle yield sleeps instead, for
 * ARCHBENCH_IDLE_NAP_US microseconds (default 100): a wait still notices its message within
 * that time, but no longer spends the node's budget.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <time.h>

static long nap_ns = -1;

int sched_yield(void) {
    if (nap_ns < 0) {
        const char *text = getenv("ARCHBENCH_IDLE_NAP_US");
        long micros = text ? atol(text) : 100;
        nap_ns = (micros > 0 && micros <= 1000000) ? micros * 1000 : 100000;
    }
    struct timespec nap = {nap_ns / 1000000000L, nap_ns % 1000000000L};
    nanosleep(&nap, NULL);
    return 0;
}
