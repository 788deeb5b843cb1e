/* Bugcheck reports (docs/wdk.md, "Bugcheck reports"): what a driver crash says on Windows — a
 * bugcheck code and name, the faulting address and access, the IRQL, what the thread was doing,
 * the stack — for every fatal signal in a driver the harness runs, and for the harness's own
 * bugchecks (KeBugCheckEx, a failed NT_ASSERT).
 *
 * The unwinder is libunwind (from the signal's context: the first frame is the faulting
 * instruction), the symbolizer elfutils' libdw (function, file:line where debug information
 * exists). Pool blocks keep the stacks of their allocation and free as ids in a bounded stack
 * depot (eight frames, hashed), so that a freed block an address falls in is named with both.
 * The report goes to stderr and, when set, to a file (text) and FILE.json; then the previous
 * handler runs (a sanitizer's report follows ours) or, with none, the process exits with the
 * status of the class (SOFTNDK_WDK_EXIT_*). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "wdk_internal.h"

#define UNW_LOCAL_ONLY
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libunwind.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* What the thread is doing: a stack of records on the threads' own stacks. */

static _Thread_local struct wdk_context *tls_context;

static const char *const context_names[WDK_CTX_KIND_COUNT] = {
    [WDK_CTX_DRIVER_ENTRY] = "DriverEntry",
    [WDK_CTX_DRIVER_UNLOAD] = "DriverUnload",
    [WDK_CTX_WORK_ITEM] = "a work item",
    [WDK_CTX_IRP_DISPATCH] = "an IRP dispatch routine",
    [WDK_CTX_IRP_COMPLETION] = "an IRP completion routine",
    [WDK_CTX_UNLOAD_CHECKS] = "the runner's checks after DriverUnload",
};

void wdk_context_enter(struct wdk_context *c, enum wdk_context_kind kind, const void *routine,
                       const void *object)
{
    c->kind = kind;
    c->routine = routine;
    c->object = object;
    c->outer = tls_context;
    tls_context = c;
}

void wdk_context_leave(struct wdk_context *c)
{
    tls_context = c->outer;
}

/* ------------------------------------------------------------------------------------------ */
/* Stack depot: each distinct stack of up to WDK_STACK_FRAMES return addresses once, by hash. */

#define DEPOT_SLOTS  16384u
#define DEPOT_PROBES 32u

struct depot_entry {
    uint64_t hash; /* 0: empty */
    unsigned n;
    void *pc[WDK_STACK_FRAMES];
};
static struct depot_entry depot[DEPOT_SLOTS];
static pthread_mutex_t depot_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_ulong depot_full; /* stacks not kept: the depot was full along their probe */

uint32_t wdk_stack_save(unsigned skip)
{
    void *buf[WDK_STACK_FRAMES + 8];
    if (skip > 8)
        skip = 8;
    int n = unw_backtrace(buf, (int)(WDK_STACK_FRAMES + skip + 1));
    if (n <= (int)(skip + 1))
        return 0;
    void **pc = buf + skip + 1; /* not this function's frame */
    unsigned k = (unsigned)n - skip - 1;
    if (k > WDK_STACK_FRAMES)
        k = WDK_STACK_FRAMES;
    uint64_t h = 1469598103934665603ull;
    for (unsigned i = 0; i < k; i++) {
        h ^= (uint64_t)(uintptr_t)pc[i];
        h *= 1099511628211ull;
    }
    h |= 1; /* never 0 */
    pthread_mutex_lock(&depot_lock);
    for (unsigned p = 0; p < DEPOT_PROBES; p++) {
        uint32_t slot = (uint32_t)((h + p) % DEPOT_SLOTS);
        struct depot_entry *e = &depot[slot];
        if (e->hash == h && e->n == k && memcmp(e->pc, pc, k * sizeof *pc) == 0) {
            pthread_mutex_unlock(&depot_lock);
            return slot + 1;
        }
        if (e->hash == 0) {
            memcpy(e->pc, pc, k * sizeof *pc);
            e->n = k;
            atomic_thread_fence(memory_order_release);
            e->hash = h;
            pthread_mutex_unlock(&depot_lock);
            return slot + 1;
        }
    }
    pthread_mutex_unlock(&depot_lock);
    atomic_fetch_add_explicit(&depot_full, 1, memory_order_relaxed);
    return 0;
}

unsigned wdk_stack_get(uint32_t id, void *pc[WDK_STACK_FRAMES])
{
    if (id == 0 || id > DEPOT_SLOTS)
        return 0;
    const struct depot_entry *e = &depot[id - 1];
    if (e->hash == 0)
        return 0;
    atomic_thread_fence(memory_order_acquire);
    memcpy(pc, e->pc, e->n * sizeof *pc);
    return e->n;
}

uint64_t wdk_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------------------------------ */
/* The report: text and JSON built in static buffers (a crashing process has no heap it can
 * trust), written with write(2). */

#define REPORT_CAP 65536u

struct sink {
    char buf[REPORT_CAP];
    size_t len;
};
static struct sink text, json;

__attribute__((format(printf, 2, 3))) static void put(struct sink *s, const char *fmt, ...)
{
    if (s->len >= sizeof s->buf - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(s->buf + s->len, sizeof s->buf - s->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        s->len += (size_t)n < sizeof s->buf - s->len ? (size_t)n : sizeof s->buf - s->len - 1;
}

/* A JSON string value (quotes included). */
static void put_json_str(const char *v)
{
    put(&json, "\"");
    for (const unsigned char *p = (const unsigned char *)(v ? v : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            put(&json, "\\%c", *p);
        else if (*p < 0x20)
            put(&json, "\\u%04x", *p);
        else
            put(&json, "%c", *p);
    }
    put(&json, "\"");
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return;
        p += k;
        n -= (size_t)k;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Symbols: libdw over the process's own maps, made when the first report needs it. */

static Dwfl *dwfl;
static char *debuginfo_path;
static const Dwfl_Callbacks dwfl_callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

static void symbols_open(void)
{
    if (dwfl)
        return;
    dwfl = dwfl_begin(&dwfl_callbacks);
    if (!dwfl)
        return;
    if (dwfl_linux_proc_report(dwfl, getpid()) != 0 || dwfl_report_end(dwfl, NULL, NULL) != 0) {
        dwfl_end(dwfl);
        dwfl = NULL;
    }
}

struct frame_info {
    const char *function; /* NULL: unknown */
    unsigned long offset;
    const char *module; /* basename */
    const char *file;   /* NULL: no line information */
    int line;
};

/* pc: a return address unless `exact` (the faulting instruction): looked up at pc - 1. */
static void symbolize(void *pc, bool exact, struct frame_info *fi)
{
    memset(fi, 0, sizeof *fi);
    if (!dwfl)
        return;
    Dwarf_Addr a = (Dwarf_Addr)(uintptr_t)pc - (exact ? 0 : 1);
    Dwfl_Module *m = dwfl_addrmodule(dwfl, a);
    if (!m)
        return;
    const char *mod = dwfl_module_info(m, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    if (mod) {
        const char *slash = strrchr(mod, '/');
        fi->module = slash ? slash + 1 : mod;
    }
    GElf_Off off = 0;
    GElf_Sym sym;
    const char *name = dwfl_module_addrinfo(m, a, &off, &sym, NULL, NULL, NULL);
    if (name) {
        fi->function = name;
        fi->offset = (unsigned long)off + (exact ? 0 : 1);
    }
    const char *file = NULL;
    int line = 0;
    Dwfl_Line *l = dwfl_module_getsrc(m, a);
    if (l) {
        file = dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL);
    } else {
        /* No .debug_aranges (clang emits none, and libdw 0.188 finds no unit without it):
         * ask each unit whether it has the address. */
        Dwarf_Addr bias = 0;
        Dwarf *dw = dwfl_module_getdwarf(m, &bias);
        Dwarf_CU *cu = NULL;
        Dwarf_Die cudie;
        while (dw && dwarf_get_units(dw, cu, &cu, NULL, NULL, &cudie, NULL) == 0) {
            if (dwarf_haspc(&cudie, a - bias) <= 0)
                continue;
            Dwarf_Line *dl = dwarf_getsrc_die(&cudie, a - bias);
            if (dl) {
                file = dwarf_linesrc(dl, NULL, NULL);
                dwarf_lineno(dl, &line);
            }
            break;
        }
    }
    if (file) {
        const char *slash = strrchr(file, '/');
        fi->file = slash ? slash + 1 : file;
        fi->line = line;
    }
}

/* "Function+0x1e (file.c:12) [module]" */
static void frame_text(void *pc, bool exact, char *out, size_t cap, struct frame_info *fi)
{
    symbolize(pc, exact, fi);
    int n;
    if (fi->function)
        n = snprintf(out, cap, "%s+0x%lx", fi->function, fi->offset);
    else
        n = snprintf(out, cap, "%p", pc);
    if (n < 0 || (size_t)n >= cap)
        return;
    if (fi->file)
        n += snprintf(out + n, cap - (size_t)n, " (%s:%d)", fi->file, fi->line);
    if ((size_t)n < cap && fi->module)
        snprintf(out + n, cap - (size_t)n, " [%s]", fi->module);
}

/* One stack: text lines "  #i ..." and a JSON array. */
static void put_stack(const char *label, void *const *pc, unsigned n, bool first_exact)
{
    put(&text, "%s:\n", label);
    put(&json, "[");
    for (unsigned i = 0; i < n; i++) {
        char line[512];
        struct frame_info fi;
        frame_text(pc[i], first_exact && i == 0, line, sizeof line, &fi);
        put(&text, "  #%-2u %s\n", i, line);
        put(&json, "%s{\"pc\":\"%p\",\"function\":", i ? "," : "", pc[i]);
        put_json_str(fi.function);
        put(&json, ",\"file\":");
        put_json_str(fi.file);
        put(&json, ",\"line\":%d,\"module\":", fi.line);
        put_json_str(fi.module);
        put(&json, "}");
    }
    put(&json, "]");
}

/* The first driver-facing function of a stack: "RdmaFreeWr ← RdmaComplete ← ..." (at most
 * three, the harness's own frames skipped). */
static void stack_summary(void *const *pc, unsigned n, char *out, size_t cap)
{
    size_t len = 0;
    unsigned shown = 0;
    out[0] = 0;
    for (unsigned i = 0; i < n && shown < 3 && len < cap; i++) {
        struct frame_info fi;
        symbolize(pc[i], false, &fi);
        if (fi.module && strstr(fi.module, "libsoftndk-wdk"))
            continue; /* ExAllocatePoolWithTag and friends */
        char one[256];
        if (fi.function && fi.file)
            snprintf(one, sizeof one, "%s (%s:%d)", fi.function, fi.file, fi.line);
        else if (fi.function)
            snprintf(one, sizeof one, "%s", fi.function);
        else
            snprintf(one, sizeof one, "%p", pc[i]);
        int k = snprintf(out + len, cap - len, "%s%s", shown ? " <- " : "", one);
        if (k < 0)
            break;
        len += (size_t)k;
        shown++;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Bugcheck codes (Windows' numbers and names). */

#define BC_KMODE_EXCEPTION_NOT_HANDLED                0x0000001Eu
#define BC_PAGE_FAULT_IN_NONPAGED_AREA                0x00000050u
#define BC_SYSTEM_THREAD_EXCEPTION_NOT_HANDLED        0x0000007Eu
#define BC_UNEXPECTED_KERNEL_MODE_TRAP                0x0000007Fu
#define BC_DRIVER_PAGE_FAULT_IN_FREED_SPECIAL_POOL    0x000000D5u
#define BC_DRIVER_PAGE_FAULT_BEYOND_END_OF_ALLOCATION 0x000000D6u

struct pending_bugcheck {
    char message[1024]; /* the harness's explanation of its own bugcheck */
    const void *block;  /* the pool block it is about, or NULL */
};
static struct pending_bugcheck pending;
static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;

void wdk_crash_set_message(const char *fmt, va_list ap)
{
    pthread_mutex_lock(&pending_lock);
    vsnprintf(pending.message, sizeof pending.message, fmt, ap);
    pthread_mutex_unlock(&pending_lock);
}

void wdk_crash_block(const void *block)
{
    pthread_mutex_lock(&pending_lock);
    pending.block = block;
    pthread_mutex_unlock(&pending_lock);
}

void wdk_crash_message(const char *msg)
{
    pthread_mutex_lock(&pending_lock);
    snprintf(pending.message, sizeof pending.message, "%s", msg);
    pthread_mutex_unlock(&pending_lock);
}

/* ------------------------------------------------------------------------------------------ */
/* Installation and the handler. */

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
#define NFATAL (sizeof fatal_signals / sizeof fatal_signals[0])
static struct sigaction previous[NFATAL];
static atomic_bool installed;
static atomic_int reporting; /* 0, then the thread id of the reporting thread */
static char report_path[4096];
static atomic_bool reported; /* a report was written (KeBugCheckEx reports before abort) */
static int reported_class;   /* its class */

static int slot_of(int sig)
{
    for (unsigned i = 0; i < NFATAL; i++)
        if (fatal_signals[i] == sig)
            return (int)i;
    return -1;
}

static void handler(int sig, siginfo_t *si, void *ucv);
static void *report_stack; /* the reports' own stack (on_report_stack) */
#define REPORT_STACK_SIZE ((size_t)4 << 20)

static void install_alt_stack(void)
{
    /* a stack overflow leaves no stack to report on: each driver thread gets its own */
    size_t size = 256u << 10; /* the handler's entry; the report itself has its own stack */
    stack_t cur;
    /* a sanitizer's own (tens of KiB) may be too small even for that */
    if (sigaltstack(NULL, &cur) == 0 && !(cur.ss_flags & SS_DISABLE) && cur.ss_size >= size)
        return;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return;
    stack_t ss = {.ss_sp = p, .ss_size = size, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0)
        munmap(p, size);
}

void wdk_crash_thread_start(void)
{
    if (atomic_load(&installed))
        install_alt_stack();
}

VOID SoftNdkWdkInstallCrashReport(PCSTR ReportPath)
{
    if (ReportPath)
        snprintf(report_path, sizeof report_path, "%s", ReportPath);
    if (atomic_exchange(&installed, true))
        return;
    void *st =
        mmap(NULL, REPORT_STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    report_stack = st == MAP_FAILED ? NULL : st;
    install_alt_stack();
    for (unsigned i = 0; i < NFATAL; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = handler;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(fatal_signals[i], &sa, &previous[i]);
    }
}

/* The classes and their exit statuses (softndk_wdk.h). */
static const char *const class_names[] = {
    [SOFTNDK_WDK_EXIT_BUGCHECK] = "bugcheck",
    [SOFTNDK_WDK_EXIT_ASSERTION] = "assertion",
    [SOFTNDK_WDK_EXIT_NULL_POINTER] = "null_pointer",
    [SOFTNDK_WDK_EXIT_FREED_POOL] = "freed_pool",
    [SOFTNDK_WDK_EXIT_POOL_OVERRUN] = "pool_overrun",
    [SOFTNDK_WDK_EXIT_STACK_OVERFLOW] = "stack_overflow",
    [SOFTNDK_WDK_EXIT_BAD_ADDRESS] = "bad_address",
    [SOFTNDK_WDK_EXIT_ILLEGAL_INSTRUCTION] = "illegal_instruction",
    [SOFTNDK_WDK_EXIT_ARITHMETIC] = "arithmetic",
    [SOFTNDK_WDK_EXIT_ABORT] = "abort",
};

struct fault {
    int sig;
    int exit_class;
    ULONG code;
    ULONG_PTR p[4];
    char what[1024];      /* the classification, one sentence */
    char block[2048];     /* the pool block concerned, with its history (or "") */
    const ucontext_t *uc; /* NULL for a bugcheck called directly */
};

static const char *access_name(int access)
{
    return access == 1 ? "write" : access == 2 ? "execute" : "read";
}

/* A pool block's description: "freed pool block 0x.. tag 'Rdma', 312 bytes, allocated by A <-
 * B, freed by C <- D, 3 ms before". */
static void describe_block(const struct wdk_pool_hit *h, char *out, size_t cap)
{
    char tag[5];
    SoftNdkWdkFormatTag(h->tag, tag);
    void *pc[WDK_STACK_FRAMES];
    char alloc[768] = "?", freed[768] = "?";
    unsigned n = wdk_stack_get(h->alloc_stack, pc);
    if (n)
        stack_summary(pc, n, alloc, sizeof alloc);
    else if (h->alloc_caller)
        snprintf(alloc, sizeof alloc, "%p", h->alloc_caller);
    n = wdk_stack_get(h->free_stack, pc);
    if (n)
        stack_summary(pc, n, freed, sizeof freed);
    else if (h->free_caller)
        snprintf(freed, sizeof freed, "%p", h->free_caller);
    uint64_t now = wdk_now_ns();
    if (h->freed)
        snprintf(
            out, cap,
            "freed pool block %p, tag '%s', %zu bytes%s; allocated by %s; freed by %s, %.3f ms "
            "before",
            h->user, tag, h->size, h->special ? " (special pool)" : "", alloc, freed,
            (double)(now - h->free_ns) / 1e6);
    else
        snprintf(out, cap, "pool block %p, tag '%s', %zu bytes%s; allocated by %s, %.3f ms before",
                 h->user, tag, h->size, h->special ? " (special pool)" : "", alloc,
                 (double)(now - h->alloc_ns) / 1e6);
}

/* Is addr in this thread's stack guard (just below its lowest usable address)? */
static bool in_stack_guard(uintptr_t addr)
{
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0)
        return false;
    void *lo = NULL;
    size_t size = 0, guard = 0;
    pthread_attr_getstack(&attr, &lo, &size);
    pthread_attr_getguardsize(&attr, &guard);
    pthread_attr_destroy(&attr);
    uintptr_t l = (uintptr_t)lo;
    if (guard < 4096)
        guard = 4096;
    return addr < l + 4096 && addr + guard + 65536 >= l; /* the guard, or just above its edge */
}

static const char *const gregs_names[] = {"r8",  "r9",  "r10", "r11", "r12", "r13",
                                          "r14", "r15", "rdi", "rsi", "rbp", "rbx",
                                          "rdx", "rax", "rcx", "rsp", "rip"};

static void classify_fault(struct fault *f, const siginfo_t *si, int irql)
{
    uintptr_t addr = (uintptr_t)si->si_addr;
    const greg_t *g = f->uc ? f->uc->uc_mcontext.gregs : NULL;
    int access = 0;
    if (g && f->sig == SIGSEGV) {
        unsigned long err = (unsigned long)g[REG_ERR];
        access = (err & 0x10) ? 2 : (err & 0x2) ? 1 : 0;
    }
    ULONG_PTR pc = g ? (ULONG_PTR)g[REG_RIP] : 0;
    bool gp = f->sig == SIGSEGV && si->si_code == SI_KERNEL; /* no address: a non-canonical one */
    struct wdk_pool_hit hit;
    if (gp) {
        /* The address is not reported; the registers say what it was made of. */
        f->exit_class = SOFTNDK_WDK_EXIT_BAD_ADDRESS;
        f->code = BC_KMODE_EXCEPTION_NOT_HANDLED;
        f->p[0] = 0xC0000005u;
        f->p[1] = pc;
        snprintf(f->what, sizeof f->what,
                 "general protection fault: an access through a non-canonical address");
        for (int r = 0; g && r <= REG_RCX; r++) {
            uint64_t v = (uint64_t)g[r];
            if ((v >> 32) == 0xFDFDFDFDu) {
                f->exit_class = SOFTNDK_WDK_EXIT_FREED_POOL;
                f->code = DRIVER_VERIFIER_DETECTED_VIOLATION; /* Driver Verifier names it */
                f->p[0] = 0x1003; /* as "freed pool memory accessed" (harness's subcode) */
                f->p[1] = (ULONG_PTR)v;
                f->p[2] = pc;
                snprintf(f->what, sizeof f->what,
                         "use of a pointer read from freed pool: %s = 0x%016" PRIx64
                         " is the freed-pool fill 0xFD... (%+" PRId64
                         "): the pointer was loaded from a pool block after it was freed",
                         gregs_names[r], v, (int64_t)(v - 0xFDFDFDFDFDFDFDFDull));
                break;
            }
            if ((v >> 32) == 0xBDBDBDBDu) {
                snprintf(f->what, sizeof f->what,
                         "use of an uninitialized pointer: %s = 0x%016" PRIx64
                         " is the fill of uninitialized pool 0xBD...",
                         gregs_names[r], v);
                break;
            }
        }
        /* A register that still points into a freed block names the block. */
        for (int r = 0; g && r <= REG_RCX; r++) {
            uint64_t v = (uint64_t)g[r];
            if (wdk_pool_find((const void *)(uintptr_t)v, &hit) && hit.freed) {
                char d[1800];
                describe_block(&hit, d, sizeof d);
                snprintf(f->block, sizeof f->block, "%s = %p points %zu bytes into the %s",
                         gregs_names[r], (void *)(uintptr_t)v, hit.offset, d);
                break;
            }
        }
        return;
    }
    if (f->sig == SIGSEGV && wdk_pool_find((const void *)addr, &hit)) {
        char d[1800];
        describe_block(&hit, d, sizeof d);
        if (hit.freed) {
            f->exit_class = SOFTNDK_WDK_EXIT_FREED_POOL;
            f->code = BC_DRIVER_PAGE_FAULT_IN_FREED_SPECIAL_POOL;
            snprintf(f->what, sizeof f->what, "%s of freed pool at %p, offset %zu of the block",
                     access_name(access), (void *)addr, hit.offset);
        } else if (hit.after) {
            f->exit_class = SOFTNDK_WDK_EXIT_POOL_OVERRUN;
            f->code = BC_DRIVER_PAGE_FAULT_BEYOND_END_OF_ALLOCATION;
            snprintf(f->what, sizeof f->what, "%s %zu byte(s) past the end of a pool block at %p",
                     access_name(access), hit.offset - hit.size + 1, (void *)addr);
        } else if (hit.before) {
            f->exit_class = SOFTNDK_WDK_EXIT_POOL_OVERRUN;
            f->code = BC_DRIVER_PAGE_FAULT_BEYOND_END_OF_ALLOCATION;
            snprintf(f->what, sizeof f->what,
                     "%s before the start of a pool block at %p (underrun)", access_name(access),
                     (void *)addr);
        } else {
            f->exit_class = SOFTNDK_WDK_EXIT_BAD_ADDRESS;
            f->code = BC_PAGE_FAULT_IN_NONPAGED_AREA;
            snprintf(f->what, sizeof f->what, "%s fault inside a live pool block at %p",
                     access_name(access), (void *)addr);
        }
        snprintf(f->block, sizeof f->block, "%s", d);
        f->p[0] = addr;
        f->p[1] = (ULONG_PTR)access;
        f->p[2] = pc;
        return;
    }
    if (f->sig == SIGSEGV && addr < 0x10000) {
        f->exit_class = SOFTNDK_WDK_EXIT_NULL_POINTER;
        snprintf(f->what, sizeof f->what,
                 "NULL pointer %s%s at offset 0x%" PRIxPTR
                 " (address %p: a field of a structure reached through a NULL pointer)",
                 access_name(access), access == 2 ? "" : " of a field", addr, (void *)addr);
    } else if (f->sig == SIGSEGV && in_stack_guard(addr)) {
        f->exit_class = SOFTNDK_WDK_EXIT_STACK_OVERFLOW;
        f->code = BC_UNEXPECTED_KERNEL_MODE_TRAP;
        f->p[0] = 8; /* a double fault: the kernel stack overflowed */
        snprintf(f->what, sizeof f->what,
                 "stack overflow: %s at %p, in the guard page below this thread's stack",
                 access_name(access), (void *)addr);
        return;
    } else {
        f->exit_class = SOFTNDK_WDK_EXIT_BAD_ADDRESS;
        snprintf(f->what, sizeof f->what, "%s of %s address %p", access_name(access),
                 f->sig == SIGBUS             ? "a bad (bus error)"
                 : si->si_code == SEGV_ACCERR ? "a protected"
                                              : "an unmapped",
                 (void *)addr);
    }
    /* Windows: a fault at DISPATCH_LEVEL or above is 0xD1 whatever the address; below, in a
     * system thread, 0x7E for a NULL dereference and 0x50 for an invalid address. */
    if (irql >= DISPATCH_LEVEL) {
        f->code = DRIVER_IRQL_NOT_LESS_OR_EQUAL;
        f->p[0] = addr;
        f->p[1] = (ULONG_PTR)irql;
        f->p[2] = access == 1;
        f->p[3] = pc;
    } else if (f->exit_class == SOFTNDK_WDK_EXIT_NULL_POINTER) {
        f->code = BC_SYSTEM_THREAD_EXCEPTION_NOT_HANDLED;
        f->p[0] = 0xC0000005u;
        f->p[1] = pc;
    } else {
        f->code = BC_PAGE_FAULT_IN_NONPAGED_AREA;
        f->p[0] = addr;
        f->p[1] = access == 1 ? 1 : access == 2 ? 10 : 0;
        f->p[2] = pc;
    }
}

/* The softndk function that calls a consumer callback, by name: what the callback is. */
static const char *ndk_callback_of(const char *fn)
{
    if (!fn)
        return NULL;
    if (!strcmp(fn, "cq_notify_call"))
        return "an NDK CQ notification callback (NDK_FN_CQ_NOTIFICATION_CALLBACK)";
    if (!strcmp(fn, "srq_notify_call"))
        return "an NDK SRQ notification callback (NDK_FN_SRQ_NOTIFICATION_CALLBACK)";
    if (!strcmp(fn, "deliver_fn"))
        return "an NDK connector callback (a request completion, a connect event or a "
               "disconnect event)";
    if (!strcmp(fn, "close_work_fn"))
        return "an NDK close completion (NDK_FN_REQUEST_COMPLETION of NdkClose*)";
    return NULL;
}

static void put_doing(void *const *pc, unsigned n)
{
    char doing[1024] = "";
    const struct wdk_context *c = tls_context;
    if (c) {
        char routine[512] = "";
        if (c->routine) {
            struct frame_info fi;
            frame_text((void *)(uintptr_t)c->routine, true, routine, sizeof routine, &fi);
        }
        snprintf(doing, sizeof doing, "%s%s%s", context_names[c->kind], routine[0] ? ": " : "",
                 routine);
        if (c->object) {
            size_t l = strlen(doing);
            snprintf(doing + l, sizeof doing - l, " (object %p)", c->object);
        }
    } else {
        for (unsigned i = 1; i < n; i++) {
            struct frame_info fi;
            symbolize(pc[i], false, &fi);
            const char *cb = ndk_callback_of(fi.function);
            if (cb) {
                struct frame_info callee;
                symbolize(pc[i - 1], i - 1 == 0, &callee);
                snprintf(doing, sizeof doing, "%s: %s, on a softndk progress thread", cb,
                         callee.function ? callee.function : "?");
                break;
            }
        }
        if (!doing[0])
            snprintf(doing, sizeof doing,
                     wdk_is_driver_thread() ? "a driver thread, outside the runner's calls"
                                            : "a thread that is not the driver's (a softndk "
                                              "progress thread: NDK callbacks run there)");
    }
    put(&text, "DOING:   %s\n", doing);
    put(&json, ",\"doing\":");
    put_json_str(doing);
}

static const char *const exception_names[] = {[SIGSEGV] = "SIGSEGV",
                                              [SIGBUS] = "SIGBUS",
                                              [SIGILL] = "SIGILL",
                                              [SIGFPE] = "SIGFPE",
                                              [SIGABRT] = "SIGABRT"};

static void write_report(const struct fault *f)
{
    text.len = json.len = 0;
    symbols_open();
    int irql = KeGetCurrentIrql();
    put(&text,
        "\n*** STOP: 0x%08X (0x%016llX, 0x%016llX, 0x%016llX, 0x%016llX)\n*** %s\n"
        "softndk-wdk bugcheck report\n",
        f->code, (unsigned long long)f->p[0], (unsigned long long)f->p[1],
        (unsigned long long)f->p[2], (unsigned long long)f->p[3], wdk_bugcheck_name(f->code));
    put(&text, "CLASS:   %s (exit status %d)\n", class_names[f->exit_class], f->exit_class);
    put(&text, "SIGNAL:  %s\n", f->sig > 0 ? exception_names[f->sig] : "none (KeBugCheckEx)");
    put(&text, "WHAT:    %s\n", f->what);
    if (f->block[0])
        put(&text, "BLOCK:   %s\n", f->block);
    put(&text, "IRQL:    %d (%s)\n", irql,
        irql == PASSIVE_LEVEL    ? "PASSIVE_LEVEL"
        : irql == APC_LEVEL      ? "APC_LEVEL"
        : irql == DISPATCH_LEVEL ? "DISPATCH_LEVEL"
                                 : "above DISPATCH_LEVEL");
    put(&json, "{\"code\":\"0x%08X\",\"name\":", f->code);
    put_json_str(wdk_bugcheck_name(f->code));
    put(&json, ",\"parameters\":[\"0x%llX\",\"0x%llX\",\"0x%llX\",\"0x%llX\"]",
        (unsigned long long)f->p[0], (unsigned long long)f->p[1], (unsigned long long)f->p[2],
        (unsigned long long)f->p[3]);
    put(&json, ",\"class\":\"%s\",\"exit_status\":%d,\"signal\":", class_names[f->exit_class],
        f->exit_class);
    put_json_str(f->sig > 0 ? exception_names[f->sig] : NULL);
    put(&json, ",\"what\":");
    put_json_str(f->what);
    put(&json, ",\"block\":");
    put_json_str(f->block);
    put(&json, ",\"irql\":%d", irql);

    void *pc[64];
    unsigned n = 0;
    unw_cursor_t cur;
    unw_context_t here;
    bool from_signal = f->uc != NULL;
    int ok = from_signal
                 ? unw_init_local2(&cur, (unw_context_t *)(uintptr_t)f->uc, UNW_INIT_SIGNAL_FRAME)
                 : (unw_getcontext(&here), unw_init_local(&cur, &here));
    if (ok == 0) {
        do {
            unw_word_t ip = 0;
            if (unw_get_reg(&cur, UNW_REG_IP, &ip) != 0 || ip == 0)
                break;
            pc[n++] = (void *)(uintptr_t)ip;
        } while (n < 64 && unw_step(&cur) > 0);
    }
    /* A bugcheck called directly: drop the harness's own frames at the top. */
    unsigned first = 0;
    if (!from_signal) {
        for (unsigned i = 0; i < n && i < 8; i++) {
            struct frame_info fi;
            symbolize(pc[i], false, &fi);
            if (fi.function && (!strcmp(fi.function, "KeBugCheckEx") ||
                                !strcmp(fi.function, "SoftNdkWdkAssertFailed") ||
                                !strcmp(fi.function, "wdk_bugcheck_msg")))
                first = i + 1;
        }
        /* and the harness's routine that found the fault (wdk_pool_free...): the driver's
         * call of it is the first frame worth reading */
        while (first + 1 < n) {
            struct frame_info fi;
            symbolize(pc[first], false, &fi);
            if (!fi.module || !strstr(fi.module, "libsoftndk-wdk"))
                break;
            first++;
        }
        if (first >= n)
            first = 0;
    }
    put_doing(pc + first, n - first);
    put(&json, ",\"stack\":");
    put_stack("STACK", pc + first, n - first, from_signal);
    if (from_signal) {
        const greg_t *g = f->uc->uc_mcontext.gregs;
        put(&text, "REGISTERS:");
        for (int r = 0; r <= REG_RIP; r++)
            put(&text, "%s%s=%016llx", r % 4 == 0 ? "\n  " : " ", gregs_names[r],
                (unsigned long long)g[r]);
        put(&text, "\n");
    }
    unsigned long lost = atomic_load(&depot_full);
    if (lost)
        put(&text, "(the stack depot was full: %lu pool stack(s) not kept)\n", lost);
    put(&text, "\n");
    put(&json, "}\n");

    write_all(2, text.buf, text.len);
    if (report_path[0]) {
        int fd = open(report_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
            write_all(fd, text.buf, text.len);
            close(fd);
        }
        char jp[sizeof report_path + 8];
        snprintf(jp, sizeof jp, "%s.json", report_path);
        fd = open(jp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
            write_all(fd, json.buf, json.len);
            close(fd);
        }
    }
}

/* Only one thread reports; another that crashes meanwhile waits for the end. */
static bool begin_report(void)
{
    int self = (int)gettid();
    int expect = 0;
    if (atomic_compare_exchange_strong(&reporting, &expect, self))
        return true;
    if (expect == self)
        return false; /* a fault inside the report itself: give up on it */
    for (;;)
        pause();
}

void wdk_crash_bugcheck(ULONG code, ULONG_PTR p1, ULONG_PTR p2, ULONG_PTR p3, ULONG_PTR p4)
{
    struct fault f;
    memset(&f, 0, sizeof f);
    f.code = code;
    f.p[0] = p1, f.p[1] = p2, f.p[2] = p3, f.p[3] = p4;
    f.exit_class = code == KERNEL_SECURITY_CHECK_FAILURE && p1 == 0x2c ? SOFTNDK_WDK_EXIT_ASSERTION
                                                                       : SOFTNDK_WDK_EXIT_BUGCHECK;
    pthread_mutex_lock(&pending_lock);
    snprintf(f.what, sizeof f.what, "%s",
             pending.message[0] ? pending.message : "KeBugCheckEx called by the driver");
    const void *block = pending.block;
    pthread_mutex_unlock(&pending_lock);
    if (!begin_report())
        return;
    struct wdk_pool_hit hit;
    if (block) {
        symbols_open();
        if (wdk_pool_find(block, &hit))
            describe_block(&hit, f.block, sizeof f.block);
    }
    write_report(&f);
    reported_class = f.exit_class;
    atomic_store(&reported, true);
}

/* After the report: the previous handler (a sanitizer's report follows), or the class's exit
 * status when there was none. */
static void finish(int sig, int exit_class)
{
    int s = slot_of(sig);
    struct sigaction *old = s >= 0 ? &previous[s] : NULL;
    bool chain = old && (old->sa_flags & SA_SIGINFO
                             ? old->sa_sigaction != NULL
                             : old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN);
    if (chain) {
        sigaction(sig, old, NULL);
        return; /* a fault re-executes the instruction; abort raises again below */
    }
    _exit(exit_class);
}

/* The report of a signal, on the report stack: one reporter at a time (begin_report). */
static struct {
    int sig;
    siginfo_t *si;
    struct fault f;
} job;

static void fault_report(void)
{
    symbols_open(); /* before the classification: it names the pool block's stacks */
    int irql = KeGetCurrentIrql();
    switch (job.sig) {
    case SIGSEGV:
    case SIGBUS:
        classify_fault(&job.f, job.si, irql);
        break;
    case SIGILL:
        job.f.exit_class = SOFTNDK_WDK_EXIT_ILLEGAL_INSTRUCTION;
        job.f.code = BC_KMODE_EXCEPTION_NOT_HANDLED;
        job.f.p[0] = 0xC000001Du; /* STATUS_ILLEGAL_INSTRUCTION */
        job.f.p[1] = (ULONG_PTR)job.si->si_addr;
        snprintf(job.f.what, sizeof job.f.what, "illegal instruction at %p", job.si->si_addr);
        break;
    case SIGFPE:
        job.f.exit_class = SOFTNDK_WDK_EXIT_ARITHMETIC;
        job.f.code = BC_KMODE_EXCEPTION_NOT_HANDLED;
        job.f.p[0] = job.si->si_code == FPE_INTDIV ? 0xC0000094u : 0xC0000095u;
        job.f.p[1] = (ULONG_PTR)job.si->si_addr;
        snprintf(job.f.what, sizeof job.f.what, "%s at %p",
                 job.si->si_code == FPE_INTDIV ? "integer division by zero"
                                               : "arithmetic exception",
                 job.si->si_addr);
        break;
    default:
        job.f.exit_class = SOFTNDK_WDK_EXIT_ABORT;
        job.f.code = BC_KMODE_EXCEPTION_NOT_HANDLED;
        job.f.p[0] = 0x40000015u; /* STATUS_FATAL_APP_EXIT: abort() on Windows */
        snprintf(job.f.what, sizeof job.f.what,
                 "abort() outside a bugcheck (an assert() or a check of a library, e.g. the NDK "
                 "consumer verifier under SOFTNDK_VERIFY=strict: its report is above)");
        break;
    }
    write_report(&job.f);
}

/* The report runs on a stack of its own: the thread's may be exhausted (a stack overflow) or
 * be a sanitizer's small alternate stack, and libdw needs room. The fault's context is in
 * job.f.uc, so the unwinder starts there whatever stack the report runs on. */
static ucontext_t report_ctx, report_return;

static void on_report_stack(void)
{
    if (!report_stack) {
        fault_report();
        return;
    }
    getcontext(&report_ctx);
    report_ctx.uc_stack.ss_sp = report_stack;
    report_ctx.uc_stack.ss_size = REPORT_STACK_SIZE;
    report_ctx.uc_link = &report_return;
    makecontext(&report_ctx, fault_report, 0);
    if (swapcontext(&report_return, &report_ctx) != 0)
        fault_report();
}

static void handler(int sig, siginfo_t *si, void *ucv)
{
    const ucontext_t *uc = ucv;
    if (sig == SIGABRT && atomic_load(&reported)) {
        finish(sig, reported_class);
        raise(sig);
        return;
    }
    if (!begin_report()) {
        signal(sig, SIG_DFL);
        return;
    }
    job.sig = sig;
    job.si = si;
    memset(&job.f, 0, sizeof job.f);
    job.f.sig = sig;
    job.f.uc = uc;
    on_report_stack();
    finish(sig, job.f.exit_class);
    if (sig == SIGABRT || si->si_code <= 0)
        raise(sig); /* sent, not a fault: deliver it again to the previous handler */
}
