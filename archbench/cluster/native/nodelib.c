/* Preloaded into every process of an emulated node (LD_PRELOAD, set by the node's sshd).
 *
 * 1. Idle waits nap. Open MPI waits for messages by polling, and with mpi_yield_when_idle it
 *    calls sched_yield() on every idle pass. On a host of its own that poll burns a core nobody
 *    else needs; on an emulated node it burns the node's CPU, which then slows the rank's own
 *    compute. Here an idle yield sleeps instead, for ARCHBENCH_IDLE_NAP_US microseconds
 *    (0: the yield is passed through and waits spin).
 *
 * 2. Virtual cores (time dilation). With ARCHBENCH_THREAD_CAPS set to the cluster's cgroup
 *    directory, every thread of the process runs in a CFS group of its own inside a group of
 *    its process, in the node's (<that directory>/<host name>/vcpu/p<pid>/t<thread id>): the
 *    thread capped at ARCHBENCH_THREAD_QUOTA_US per ARCHBENCH_CFS_PERIOD_US (1/D of a core),
 *    its process at ARCHBENCH_PROCESS_QUOTA_US (its virtual cores / D), the node's threads
 *    together at the node's virtual cores / D (set on vcpu/ by `cluster up`). A thread
 *    is placed at birth (pthread_create is wrapped: the new thread places itself before it runs
 *    its start routine), and archbench_caps_arm() places the threads that already exist.
 *    Processes of archbench itself start unplaced, so that importing TensorFlow and building
 *    graphs run outside the caps, and call archbench_caps_arm() before their first timed step
 *    (archbench.cluster.threadcaps); every other process (orted, a shell, a user's program) is
 *    placed from its first instruction. archbench_caps_disarm() moves every thread back to the
 *    node's own group. Groups of threads that have exited are removed when a process arms or
 *    disarms, and by `archbench cluster down`; the group of a thread that returned from its start
 *    routine is renamed for the next thread of its process instead (cgroup v1), since
 *    TensorFlow's distributed session starts a thread on every run and a new CFS group costs
 *    several times what the run itself does.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static long nap_ns = -1;

int sched_yield(void) {
    if (nap_ns < 0) {
        const char *text = getenv("ARCHBENCH_IDLE_NAP_US");
        long micros = text ? atol(text) : 100;
        nap_ns = (micros >= 0 && micros <= 1000000) ? micros * 1000 : 100000;
    }
    if (nap_ns == 0) return (int)syscall(SYS_sched_yield);
    struct timespec nap = {nap_ns / 1000000000L, nap_ns % 1000000000L};
    nanosleep(&nap, NULL);
    return 0;
}

/* --- per-thread caps ------------------------------------------------------------------- */

static char caps_dir[PATH_MAX];  /* the node's group of thread groups; "" when not capped */
static char node_dir[PATH_MAX];  /* where a thread goes back when caps are disarmed */
static long quota_us, process_quota_us, period_us;
static int cgroup_v2;
static int armed;                /* read by every new thread: atomic */
static long placed, place_failures;

static pid_t thread_id(void) { return (pid_t)syscall(SYS_gettid); }

static int write_text(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t length = (ssize_t)strlen(text);
    ssize_t written = write(fd, text, (size_t)length);
    int saved = errno;
    close(fd);
    errno = saved;
    return written == length ? 0 : -1;
}

static int write_in(const char *dir, const char *file, const char *text) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path) return -1;
    return write_text(path, text);
}

/* Makes `dir` a capped group (if missing) with `quota` per period. Where `quota` is 0 the group
 * has no cap of its own but the highest weight: a background thread woken on a core that another
 * node's thread holds gets it at once, as it would get an idle core of its own host. */
static int make_group(const char *dir, long quota) {
    char text[64];
    if (mkdir(dir, 0755) != 0) {
        if (errno == EEXIST) return 0;  /* made before: already capped */
        return -1;
    }
    if (cgroup_v2) {
        /* v2: a thread may live apart from its process only in a threaded subtree. */
        write_in(dir, "cgroup.type", "threaded");
        if (quota <= 0) return write_in(dir, "cpu.weight", "10000");
        snprintf(text, sizeof text, "%ld %ld", quota, period_us);
        return write_in(dir, "cpu.max", text);
    }
    if (quota <= 0) return write_in(dir, "cpu.shares", "262144");
    snprintf(text, sizeof text, "%ld", period_us);
    if (write_in(dir, "cpu.cfs_period_us", text) != 0) return -1;
    snprintf(text, sizeof text, "%ld", quota);
    return write_in(dir, "cpu.cfs_quota_us", text);
}

/* Background threads of this process, told at birth (see 3. above). */
#define MAX_BACKGROUND 256
static pid_t background[MAX_BACKGROUND];
static int background_count;

static void remember_background(pid_t tid) {
    int slot = __atomic_fetch_add(&background_count, 1, __ATOMIC_SEQ_CST);
    if (slot < MAX_BACKGROUND) __atomic_store_n(&background[slot], tid, __ATOMIC_SEQ_CST);
}

static int is_background(pid_t tid) {
    int count = __atomic_load_n(&background_count, __ATOMIC_SEQ_CST);
    for (int i = 0; i < count && i < MAX_BACKGROUND; i++)
        if (__atomic_load_n(&background[i], __ATOMIC_SEQ_CST) == tid) return 1;
    return 0;
}

/* Libraries whose own threads are background threads: matched against the path of the code
 * that called pthread_create. */
static const char *const BACKGROUND_LIBRARIES[] = {
    "/horovod/", "libmpi.so", "libopen-pal.so", "libopen-rte.so", "libpmix.so", "/mca_",
    "libevent", "libgloo", NULL,
};
/* Code between the creator and pthread_create itself: skipped when looking for the creator. */
static const char *const PASS_THROUGH[] = {
    "libc.so", "libpthread", "libstdc++", "libgcc_s", "libarchbench-node", NULL,
};

static int path_has(const char *path, const char *const *needles) {
    for (int i = 0; needles[i] != NULL; i++)
        if (strstr(path, needles[i]) != NULL) return 1;
    return 0;
}

enum { FRAME_PASS = 1, FRAME_FOREGROUND = 2, FRAME_BACKGROUND = 3 };

static int classify_frame(void *code) {
    Dl_info info;
    if (dladdr(code, &info) == 0 || info.dli_fname == NULL) return FRAME_FOREGROUND;
    if (path_has(info.dli_fname, PASS_THROUGH)) return FRAME_PASS;
    /* std::thread's start, wherever a copy of it is linked (TensorFlow's is exported) */
    if (info.dli_sname != NULL && strncmp(info.dli_sname, "_ZNSt6thread", 12) == 0)
        return FRAME_PASS;
    return path_has(info.dli_fname, BACKGROUND_LIBRARIES) ? FRAME_BACKGROUND : FRAME_FOREGROUND;
}

/* Each code address's kind, looked up once: dladdr scans a library's symbol table, which in
 * TensorFlow's libraries costs most of a millisecond, and TensorFlow's distributed session
 * starts a thread on every run. An entry is the address with its kind in the top byte (user
 * space addresses use 47 bits), written in one atomic store; 0 is an empty slot. */
#define FRAME_CACHE_BITS 12
#define ADDRESS_MASK ((UINT64_C(1) << 56) - 1)
static uint64_t frame_cache[1 << FRAME_CACHE_BITS];

static int frame_kind(void *code) {
    uint64_t address = (uint64_t)(uintptr_t)code & ADDRESS_MASK;
    size_t slot = (size_t)((address * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - FRAME_CACHE_BITS));
    for (size_t probe = 0; probe < 8; probe++) {
        size_t at = (slot + probe) & ((1u << FRAME_CACHE_BITS) - 1);
        uint64_t entry = __atomic_load_n(&frame_cache[at], __ATOMIC_ACQUIRE);
        if (entry == 0) {
            int kind = classify_frame(code);
            uint64_t empty = 0;
            __atomic_compare_exchange_n(&frame_cache[at], &empty, address | ((uint64_t)kind << 56),
                                        0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
            return kind;
        }
        if ((entry & ADDRESS_MASK) == address) return (int)(entry >> 56);
    }
    return classify_frame(code);  /* a crowded neighbourhood: looked up every time */
}

/* Whether the caller of this pthread_create lies in a background library. */
static int created_by_background_library(void) {
    void *frames[24];
    int depth = backtrace(frames, 24);
    for (int i = 1; i < depth; i++) {
        int kind = frame_kind(frames[i]);
        if (kind != FRAME_PASS) return kind == FRAME_BACKGROUND;
    }
    return 0;
}

/* Groups of this process's threads that returned from their start routine (named by the thread
 * id they had), for the next threads to take: TensorFlow's distributed session starts a thread
 * on every run, and making a CFS group (mkdir, period, quota) costs far more than renaming an
 * empty one (cgroup v1; v2 renames no group). A group pruned meanwhile (its thread id is dead)
 * fails to rename and is dropped. */
#define MAX_FREE_GROUPS 64
static pid_t free_groups[MAX_FREE_GROUPS];
static int free_count;
static pthread_mutex_t free_lock = PTHREAD_MUTEX_INITIALIZER;

static void release_group(pid_t tid) {
    pthread_mutex_lock(&free_lock);
    if (free_count < MAX_FREE_GROUPS) free_groups[free_count++] = tid;
    pthread_mutex_unlock(&free_lock);
}

/* Renames a free group of `process_dir` to `dir` (the group of a new thread); 0 on success. */
static int reuse_group(const char *process_dir, const char *dir) {
    char old[PATH_MAX];
    for (;;) {
        pthread_mutex_lock(&free_lock);
        pid_t previous = free_count > 0 ? free_groups[--free_count] : 0;
        pthread_mutex_unlock(&free_lock);
        if (previous == 0) return -1;
        if (snprintf(old, sizeof old, "%s/t%d", process_dir, (int)previous) >= (int)sizeof old)
            continue;
        if (rename(old, dir) == 0) return 0;
    }
}

/* Puts thread `tid` of this process in a capped group of its own, inside its process's (or,
 * for a background thread, inside this process's group of background threads, uncapped). */
static int place_thread(pid_t tid) {
    char process_dir[PATH_MAX], dir[PATH_MAX], text[32];
    int apart = is_background(tid);
    if (snprintf(process_dir, sizeof process_dir, "%s/%c%d", caps_dir, apart ? 'b' : 'p',
                 (int)getpid()) >= (int)sizeof process_dir
        || snprintf(dir, sizeof dir, "%s/t%d", process_dir, (int)tid) >= (int)sizeof dir)
        return -1;
    if (make_group(process_dir, apart ? 0 : process_quota_us) != 0) return -1;
    if (cgroup_v2) write_in(process_dir, "cgroup.subtree_control", "+cpu");
    /* cgroup v2 renames no group: a new one each time there */
    int reused = !apart && !cgroup_v2 && reuse_group(process_dir, dir) == 0;
    if (!reused && make_group(dir, quota_us) != 0) return -1;
    snprintf(text, sizeof text, "%d", (int)tid);
    return write_in(dir, cgroup_v2 ? "cgroup.threads" : "tasks", text);
}

static int unplace_thread(pid_t tid) {
    char text[32];
    snprintf(text, sizeof text, "%d", (int)tid);
    return write_in(node_dir, cgroup_v2 ? "cgroup.threads" : "tasks", text);
}

static void count_placement(int result) {
    if (result == 0)
        __atomic_add_fetch(&placed, 1, __ATOMIC_RELAXED);
    else
        __atomic_add_fetch(&place_failures, 1, __ATOMIC_RELAXED);
}

static int is_alive(const char *id) {
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/%s", id);
    return access(proc, F_OK) == 0;
}

/* Removes the thread groups of `process_dir` whose threads no longer exist, then the process's
 * group when its process is gone (rmdir fails on a group in use). */
static void prune_process(const char *process_dir, int process_alive) {
    DIR *dir = opendir(process_dir);
    if (dir == NULL) return;
    struct dirent *entry;
    char path[PATH_MAX];
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] != 't' || is_alive(entry->d_name + 1)) continue;
        if (snprintf(path, sizeof path, "%s/%s", process_dir, entry->d_name) < (int)sizeof path)
            rmdir(path);
    }
    closedir(dir);
    if (!process_alive) rmdir(process_dir);
}

static void prune_groups(void) {
    DIR *dir = opendir(caps_dir);
    if (dir == NULL) return;
    struct dirent *entry;
    char path[PATH_MAX];
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] != 'p' && entry->d_name[0] != 'b') continue;
        if (snprintf(path, sizeof path, "%s/%s", caps_dir, entry->d_name) < (int)sizeof path)
            prune_process(path, is_alive(entry->d_name + 1));
    }
    closedir(dir);
}

/* Calls `action` for every thread of this process. */
static int for_each_thread(int (*action)(pid_t)) {
    DIR *dir = opendir("/proc/self/task");
    if (dir == NULL) return -1;
    struct dirent *entry;
    int count = 0;
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
        int result = action((pid_t)atoi(entry->d_name));
        if (action == place_thread) count_placement(result);
        if (result == 0) count++;
    }
    closedir(dir);
    return count;
}

/* Places every thread of this process, and every thread it starts from now on. Returns how
 * many threads were placed, or -1 where this process is not on a capped node. */
int archbench_caps_arm(void) {
    if (caps_dir[0] == '\0') return -1;
    __atomic_store_n(&armed, 1, __ATOMIC_SEQ_CST);  /* before the walk: no thread slips by */
    prune_groups();
    return for_each_thread(place_thread);
}

/* Moves every thread back to the node's own group; new threads stay there too. */
int archbench_caps_disarm(void) {
    if (caps_dir[0] == '\0') return -1;
    __atomic_store_n(&armed, 0, __ATOMIC_SEQ_CST);
    int moved = for_each_thread(unplace_thread);
    prune_groups();
    return moved;
}

int archbench_caps_armed(void) { return __atomic_load_n(&armed, __ATOMIC_SEQ_CST); }

/* Threads this process placed, and placements that failed (a failure leaves the thread in
 * the node's group, uncapped: the fidelity check counts what such threads spend). */
long archbench_caps_placed(void) { return __atomic_load_n(&placed, __ATOMIC_RELAXED); }
long archbench_caps_failures(void) { return __atomic_load_n(&place_failures, __ATOMIC_RELAXED); }
/* Background threads this process started (see 3. above). */
long archbench_caps_background(void) { return __atomic_load_n(&background_count, __ATOMIC_SEQ_CST); }

/* --- CPU-budget stops, sampled (timelines) --------------------------------------------
 * A traced step's engines record nothing while a CFS budget stops the process: the stop is a gap
 * in the trace. The kernel adds a stop's length to its group's throttled time when the stop
 * ends. While a traced step runs, a sampler thread of this library reads the throttled time of
 * the step thread's budget groups every few hundred microseconds and notes each increase with
 * the wall-clock time it saw it: a stop ended by then (the increase sums the group's per-CPU
 * queues, so it can exceed the stop: archbench.timeline.throttle bounds it). The sampler is a
 * background thread of the node (its own virtual core), as a profiler's would be on a host. */
#define MAX_STOP_GROUPS 4
#define MAX_STOP_EVENTS 4096
static int stop_fds[MAX_STOP_GROUPS];
static int stop_group_count;
static long long stop_seen_ns[MAX_STOP_EVENTS], stop_added_ns[MAX_STOP_EVENTS];
static int stop_group[MAX_STOP_EVENTS];
static long long stop_last[MAX_STOP_GROUPS];  /* each group's throttled time at the last reading */
static int stop_event_count;
static int sampler_running;
static long sample_interval_ns;
static pthread_t sampler_thread;

/* The group's throttled time so far, in ns (v1: `throttled_time` ns; v2: `throttled_usec`). */
static long long throttled_ns_of(int fd) {
    char text[1024];
    ssize_t length = pread(fd, text, sizeof text - 1, 0);
    if (length <= 0) return -1;
    text[length] = '\0';
    const char *at = strstr(text, "throttled_time ");
    if (at != NULL) return atoll(at + 15);
    at = strstr(text, "throttled_usec ");
    return at != NULL ? atoll(at + 15) * 1000 : -1;
}

static void *sample_stops(void *unused) {
    (void)unused;
    pid_t tid = thread_id();
    remember_background(tid);
    if (__atomic_load_n(&armed, __ATOMIC_SEQ_CST)) count_placement(place_thread(tid));
    long long *last = stop_last;  /* read by archbench_stops_start: no stop ending after it is missed */
    struct timespec nap = {0, sample_interval_ns};
    for (;;) {
        int running = __atomic_load_n(&sampler_running, __ATOMIC_SEQ_CST);
        struct timespec seen;
        clock_gettime(CLOCK_REALTIME, &seen);
        for (int i = 0; i < stop_group_count; i++) {
            long long now = throttled_ns_of(stop_fds[i]);
            if (now < 0 || last[i] < 0) continue;
            if (now > last[i] && stop_event_count < MAX_STOP_EVENTS) {
                stop_seen_ns[stop_event_count] = seen.tv_sec * 1000000000LL + seen.tv_nsec;
                stop_added_ns[stop_event_count] = now - last[i];
                stop_group[stop_event_count] = i;
                stop_event_count++;
            }
            last[i] = now;
        }
        if (!running) return NULL;  /* one last reading after the step ended */
        nanosleep(&nap, NULL);
    }
}

/* Starts sampling the cpu.stat files in `paths` (one per line) every `interval_us`; 0 on
 * success, -1 where a file cannot be opened or a sampler runs already. */
int archbench_stops_start(const char *paths, long interval_us) {
    typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (__atomic_load_n(&sampler_running, __ATOMIC_SEQ_CST) || paths == NULL) return -1;
    if (interval_us < 50 || interval_us > 100000) return -1;
    char copy[4 * PATH_MAX];
    if (snprintf(copy, sizeof copy, "%s", paths) >= (int)sizeof copy) return -1;
    stop_group_count = 0;
    stop_event_count = 0;
    for (char *line = strtok(copy, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        int fd = open(line, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || stop_group_count == MAX_STOP_GROUPS) {
            if (fd >= 0) close(fd);
            for (int i = 0; i < stop_group_count; i++) close(stop_fds[i]);
            stop_group_count = 0;
            return -1;
        }
        stop_fds[stop_group_count++] = fd;
    }
    if (stop_group_count == 0) return -1;
    for (int i = 0; i < stop_group_count; i++) stop_last[i] = throttled_ns_of(stop_fds[i]);
    sample_interval_ns = interval_us * 1000;
    __atomic_store_n(&sampler_running, 1, __ATOMIC_SEQ_CST);
    /* the real pthread_create: the sampler places itself, as a background thread */
    create_fn real_create = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (real_create == NULL || real_create(&sampler_thread, NULL, sample_stops, NULL) != 0) {
        __atomic_store_n(&sampler_running, 0, __ATOMIC_SEQ_CST);
        for (int i = 0; i < stop_group_count; i++) close(stop_fds[i]);
        stop_group_count = 0;
        return -1;
    }
    return 0;
}

/* Stops the sampler and copies what it saw, each increase of a group's throttled time (seen at,
 * ns added, the group's line in `paths`), into `seen`, `added` and `group`; returns how many (at
 * most `capacity`), or -1 where no sampler ran. */
long archbench_stops_stop(long long *seen, long long *added, int *group, long capacity) {
    if (!__atomic_load_n(&sampler_running, __ATOMIC_SEQ_CST)) return -1;
    __atomic_store_n(&sampler_running, 0, __ATOMIC_SEQ_CST);
    pthread_join(sampler_thread, NULL);
    for (int i = 0; i < stop_group_count; i++) close(stop_fds[i]);
    stop_group_count = 0;
    long count = stop_event_count < capacity ? stop_event_count : capacity;
    for (long i = 0; i < count; i++) {
        seen[i] = stop_seen_ns[i];
        added[i] = stop_added_ns[i];
        group[i] = stop_group[i];
    }
    return count;
}

struct start { void *(*routine)(void *); void *argument; int background; };

static void *start_placed(void *raw) {
    struct start start = *(struct start *)raw;
    free(raw);
    pid_t tid = thread_id();
    if (start.background) remember_background(tid);
    int in_own_group = 0;
    if (__atomic_load_n(&armed, __ATOMIC_SEQ_CST)) {
        int result = place_thread(tid);
        count_placement(result);
        in_own_group = result == 0 && !start.background;
    }
    void *value = start.routine(start.argument);
    if (in_own_group) release_group(tid);  /* empty once this thread is gone */
    return value;
}

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

int pthread_create(pthread_t *thread, const pthread_attr_t *attributes,
                   void *(*routine)(void *), void *argument) {
    static create_fn real_create;
    if (real_create == NULL) real_create = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (caps_dir[0] == '\0') return real_create(thread, attributes, routine, argument);
    struct start *start = malloc(sizeof *start);
    if (start == NULL) return real_create(thread, attributes, routine, argument);
    start->routine = routine;
    start->argument = argument;
    start->background = created_by_background_library();
    int result = real_create(thread, attributes, start_placed, start);
    if (result != 0) free(start);
    return result;
}

/* archbench's own processes (`python -m archbench...`, the `archbench` script) arm their caps
 * themselves once start-up is over. */
static int defers_caps(void) {
    char buffer[4096];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t length = read(fd, buffer, sizeof buffer - 1);
    close(fd);
    if (length <= 0) return 0;
    buffer[length] = '\0';
    for (char *word = buffer; word < buffer + length; word += strlen(word) + 1) {
        const char *base = strrchr(word, '/');
        base = base ? base + 1 : word;
        if (strncmp(word, "archbench.", 10) == 0 || strcmp(base, "archbench") == 0) return 1;
    }
    return 0;
}

__attribute__((constructor)) static void read_settings(void) {
    const char *dir = getenv("ARCHBENCH_THREAD_CAPS");
    const char *quota = getenv("ARCHBENCH_THREAD_QUOTA_US");
    const char *process_quota = getenv("ARCHBENCH_PROCESS_QUOTA_US");
    const char *period = getenv("ARCHBENCH_CFS_PERIOD_US");
    const char *version = getenv("ARCHBENCH_CGROUP");
    if (dir == NULL || quota == NULL || period == NULL || dir[0] == '\0') return;
    quota_us = atol(quota);
    process_quota_us = process_quota ? atol(process_quota) : quota_us;
    period_us = atol(period);
    if (quota_us < 1000 || process_quota_us < 1000 || period_us < 1000) return;
    struct utsname host;  /* a node's UTS namespace names it */
    if (uname(&host) != 0) return;
    char *dot = strchr(host.nodename, '.');
    if (dot != NULL) *dot = '\0';
    if (snprintf(node_dir, sizeof node_dir, "%s/%s", dir, host.nodename) >= (int)sizeof node_dir
        || snprintf(caps_dir, sizeof caps_dir, "%s/vcpu", node_dir) >= (int)sizeof caps_dir - 32) {
        caps_dir[0] = '\0';
        return;
    }
    struct stat info;  /* a host that is not one of the cluster's nodes has no such group */
    if (stat(caps_dir, &info) != 0 || !S_ISDIR(info.st_mode)) { caps_dir[0] = '\0'; return; }
    cgroup_v2 = version != NULL && strcmp(version, "v2") == 0;
    void *frames[2];
    backtrace(frames, 2);  /* loads the unwinder now, not inside a later pthread_create */
    if (defers_caps())
        unplace_thread(thread_id());  /* a child starts in its parent's thread group */
    else
        archbench_caps_arm();
}
