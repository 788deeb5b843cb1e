/* IRQL model, bugchecks, assertions, debug output, time and processors. */
#include "wdk_internal.h"
#include "ntstrsafe.h"
#include "softndk_wpp.h"

#include <ndk/softndk.h>

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* IRQL. A thread the driver does not own (softndk's progress threads, anything else) reports
 * DISPATCH_LEVEL, the highest IRQL an NDK callback may run at, so that a callback that blocks
 * or runs paged code bugchecks here as it could on Windows. Driver threads start at PASSIVE. */
static _Thread_local bool tls_driver;
static _Thread_local int tls_irql; /* raised level (spin locks, KeRaiseIrql) */

static int current_irql(void)
{
    if (tls_driver)
        return tls_irql;
    return tls_irql > DISPATCH_LEVEL ? tls_irql : DISPATCH_LEVEL;
}

VOID SoftNdkWdkEnterDriverThread(VOID)
{
    /* Volatile stores: clang's optimizer otherwise evaluates the constructor below at compile
     * time and folds "true" into the thread-local's initial value, making every thread a
     * driver thread (seen with clang 14 -O2). */
    *(volatile bool *)&tls_driver = true;
    *(volatile int *)&tls_irql = PASSIVE_LEVEL;
}

/* The thread that loads the library (the main thread of a test or of the runner) is the one
 * that calls DriverEntry. */
__attribute__((constructor)) static void wdk_loader_thread(void)
{
    SoftNdkWdkEnterDriverThread();
}

KIRQL KeGetCurrentIrql(VOID)
{
    return (KIRQL)current_irql();
}

KIRQL KfRaiseIrql(KIRQL NewIrql)
{
    int old = current_irql();
    if (NewIrql < old)
        wdk_bugcheck_msg(IRQL_NOT_GREATER_OR_EQUAL, "KeRaiseIrql to %u from %d", NewIrql, old);
    tls_irql = NewIrql;
    return (KIRQL)old;
}

VOID KeLowerIrql(KIRQL NewIrql)
{
    int old = current_irql();
    if (NewIrql > old)
        wdk_bugcheck_msg(IRQL_NOT_LESS_OR_EQUAL, "KeLowerIrql to %u from %d", NewIrql, old);
    if (!tls_driver && NewIrql < DISPATCH_LEVEL)
        wdk_bugcheck_msg(IRQL_NOT_GREATER_OR_EQUAL,
                         "KeLowerIrql to %u below DISPATCH_LEVEL on a thread that is not the "
                         "driver's (an NDK callback)",
                         NewIrql);
    tls_irql = NewIrql;
}

KIRQL KeRaiseIrqlToDpcLevel(VOID)
{
    return KfRaiseIrql(DISPATCH_LEVEL);
}

void wdk_require_irql_max(KIRQL max, const char *what)
{
    int irql = current_irql();
    if (irql > max)
        wdk_bugcheck_msg(IRQL_NOT_LESS_OR_EQUAL, "%s at IRQL %d (at most %u allowed)%s", what, irql,
                         max,
                         !tls_driver ? "; this thread is not the driver's (an NDK callback runs "
                                        "at DISPATCH_LEVEL)"
                                      : "");
}

void wdk_require_irql_min(KIRQL min, const char *what)
{
    int irql = current_irql();
    if (irql < min)
        wdk_bugcheck_msg(IRQL_NOT_GREATER_OR_EQUAL, "%s at IRQL %d (at least %u required)", what,
                         irql, min);
}

VOID SoftNdkWdkPagedCode(PCSTR File, ULONG Line)
{
    int irql = current_irql();
    if (irql > APC_LEVEL)
        wdk_bugcheck_msg(IRQL_NOT_LESS_OR_EQUAL, "PAGED_CODE() at %s:%u runs at IRQL %d%s", File,
                         Line, irql,
                         !tls_driver ? " (not a driver thread: NDK callbacks run at DISPATCH_LEVEL)"
                                      : "");
}

/* ------------------------------------------------------------------------------------------ */
/* Bugchecks */
const char *wdk_bugcheck_name(ULONG code)
{
    switch (code) {
    case 0x0000001E: return "KMODE_EXCEPTION_NOT_HANDLED";
    case 0x00000050: return "PAGE_FAULT_IN_NONPAGED_AREA";
    case 0x0000007E: return "SYSTEM_THREAD_EXCEPTION_NOT_HANDLED";
    case 0x0000007F: return "UNEXPECTED_KERNEL_MODE_TRAP";
    case 0x000000C5: return "DRIVER_CORRUPTED_EXPOOL";
    case 0x000000D5: return "DRIVER_PAGE_FAULT_IN_FREED_SPECIAL_POOL";
    case 0x000000D6: return "DRIVER_PAGE_FAULT_BEYOND_END_OF_ALLOCATION";
    case IRQL_NOT_GREATER_OR_EQUAL: return "IRQL_NOT_GREATER_OR_EQUAL";
    case IRQL_NOT_LESS_OR_EQUAL: return "IRQL_NOT_LESS_OR_EQUAL";
    case SPIN_LOCK_ALREADY_OWNED: return "SPIN_LOCK_ALREADY_OWNED";
    case SPIN_LOCK_NOT_OWNED: return "SPIN_LOCK_NOT_OWNED";
    case BAD_POOL_HEADER: return "BAD_POOL_HEADER";
    case INVALID_WORK_QUEUE_ITEM: return "INVALID_WORK_QUEUE_ITEM";
    case BAD_POOL_CALLER: return "BAD_POOL_CALLER";
    case SPECIAL_POOL_DETECTED_MEMORY_CORRUPTION:
        return "SPECIAL_POOL_DETECTED_MEMORY_CORRUPTION";
    case MULTIPLE_IRP_COMPLETE_REQUESTS:
        return "MULTIPLE_IRP_COMPLETE_REQUESTS";
    case NO_MORE_IRP_STACK_LOCATIONS:
        return "NO_MORE_IRP_STACK_LOCATIONS";
    case DRIVER_VERIFIER_DETECTED_VIOLATION: return "DRIVER_VERIFIER_DETECTED_VIOLATION";
    case DRIVER_UNLOADED_WITHOUT_CANCELLING_PENDING_OPERATIONS:
        return "DRIVER_UNLOADED_WITHOUT_CANCELLING_PENDING_OPERATIONS";
    case DRIVER_IRQL_NOT_LESS_OR_EQUAL: return "DRIVER_IRQL_NOT_LESS_OR_EQUAL";
    case MANUALLY_INITIATED_CRASH: return "MANUALLY_INITIATED_CRASH";
    case KERNEL_SECURITY_CHECK_FAILURE: return "KERNEL_SECURITY_CHECK_FAILURE";
    case WORKER_THREAD_RETURNED_AT_BAD_IRQL: return "WORKER_THREAD_RETURNED_AT_BAD_IRQL";
    default: return "BUGCHECK";
    }
}

VOID KeBugCheckEx(ULONG BugCheckCode, ULONG_PTR P1, ULONG_PTR P2, ULONG_PTR P3, ULONG_PTR P4)
{
    fflush(stderr);
    /* The report (crash.c): code, name, parameters, IRQL, what the thread did, the stack. */
    wdk_crash_bugcheck(BugCheckCode, P1, P2, P3, P4);
    /* abort() and not exit(): the process state at the failure is what a core file keeps (the
     * report's handler, when installed, ends the process with the class's status). */
    abort();
}

bool wdk_is_driver_thread(void)
{
    return tls_driver;
}

VOID KeBugCheck(ULONG BugCheckCode)
{
    KeBugCheckEx(BugCheckCode, 0, 0, 0, 0);
}

void wdk_bugcheck_msg(ULONG code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("softndk-wdk: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    va_start(ap, fmt);
    wdk_crash_set_message(fmt, ap);
    va_end(ap);
    KeBugCheckEx(code, 0, 0, 0, 0);
}

void wdk_log(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "softndk-wdk: %s\n", buf);
}

VOID SoftNdkWdkAssertFailed(PCSTR Expression, PCSTR Message, PCSTR File, ULONG Line)
{
    fprintf(stderr, "softndk-wdk: assertion failed at %s:%u: %s%s%s\n", File, Line, Expression,
            Message ? ": " : "", Message ? Message : "");
    char msg[768];
    snprintf(msg, sizeof msg, "assertion failed at %s:%u: %s%s%s", File, Line, Expression,
             Message ? ": " : "", Message ? Message : "");
    wdk_crash_message(msg);
    KeBugCheckEx(KERNEL_SECURITY_CHECK_FAILURE, 0x2c /* an assertion, FAST_FAIL_ASSERTION */,
                 (ULONG_PTR)Line, 0, 0);
}

VOID DbgBreakPoint(VOID)
{
    /* Without a kernel debugger attached a breakpoint is a crash on Windows too. */
    fprintf(stderr, "softndk-wdk: DbgBreakPoint\n");
    KeBugCheckEx(MANUALLY_INITIATED_CRASH, 0, 0, 0, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* DbgPrint: the Windows conversions, rewritten to C ones argument by argument. */
struct out {
    char *buf;
    size_t len, cap;
    bool truncated; /* something did not fit */
};

static void out_put(struct out *o, const char *s, size_t n)
{
    while (n > 0 && o->len + 1 < o->cap) {
        o->buf[o->len++] = *s++;
        n--;
    }
    if (n > 0)
        o->truncated = true;
    o->buf[o->len] = 0;
}

static void out_wide(struct out *o, const WCHAR *w, size_t n, bool nul_terminated)
{
    if (!w) {
        out_put(o, "(null)", 6);
        return;
    }
    for (size_t i = 0; nul_terminated ? w[i] != 0 : i < n; i++) {
        unsigned c = w[i];
        char u[4];
        size_t k;
        /* UTF-16 to UTF-8, with surrogate pairs; an unpaired surrogate prints as '?'. */
        if (c >= 0xD800 && c < 0xDC00 && (nul_terminated || i + 1 < n) && w[i + 1] >= 0xDC00 &&
            w[i + 1] < 0xE000) {
            unsigned cp = 0x10000 + ((c - 0xD800) << 10) + (w[i + 1] - 0xDC00u);
            i++;
            u[0] = (char)(0xF0 | (cp >> 18));
            u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
            u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
            u[3] = (char)(0x80 | (cp & 0x3F));
            k = 4;
        } else if (c >= 0xD800 && c < 0xE000) {
            u[0] = '?';
            k = 1;
        } else if (c < 0x80) {
            u[0] = (char)c;
            k = 1;
        } else if (c < 0x800) {
            u[0] = (char)(0xC0 | (c >> 6));
            u[1] = (char)(0x80 | (c & 0x3F));
            k = 2;
        } else {
            u[0] = (char)(0xE0 | (c >> 12));
            u[1] = (char)(0x80 | ((c >> 6) & 0x3F));
            u[2] = (char)(0x80 | (c & 0x3F));
            k = 3;
        }
        out_put(o, u, k);
    }
}

/* Each conversion is re-issued to snprintf with a spec built here from the driver's format:
 * a non-literal format by construction (its flags, width and precision are copied, the length
 * modifier is chosen to match the argument fetched). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
/* wide_default: the format of a wide printf (_snwprintf...), where %s and %c are wide and %S,
 * %C, %hs, %hc narrow, as in MSVC; otherwise DbgPrint's (%s narrow, %S, %ws, %ls wide). */
/* WPP's own conversions (%!FUNC!...): where the trace call was made. */
struct wpp_site {
    const char *file, *function;
    unsigned line;
};

static void format_windows(struct out *o, const char *f, bool wide_default,
                           const struct wpp_site *wpp, va_list ap)
{
    while (*f) {
        if (*f != '%') {
            const char *p = strchr(f, '%');
            size_t n = p ? (size_t)(p - f) : strlen(f);
            out_put(o, f, n);
            f += n;
            continue;
        }
        f++;
        if (*f == '%') {
            out_put(o, "%", 1);
            f++;
            continue;
        }
        if (wpp && *f == '!') {
            const char *name = f + 1, *end = strchr(name, '!');
            size_t n = end ? (size_t)(end - name) : 0;
            char piece[160];
#define WPP_IS(x) (n == sizeof(x) - 1 && memcmp(name, x, n) == 0)
            if (end && WPP_IS("FUNC")) {
                out_put(o, wpp->function, strlen(wpp->function));
            } else if (end && WPP_IS("FILE")) {
                const char *b = strrchr(wpp->file, '/');
                b = b ? b + 1 : wpp->file;
                out_put(o, b, strlen(b));
            } else if (end && WPP_IS("LINE")) {
                snprintf(piece, sizeof piece, "%u", wpp->line);
                out_put(o, piece, strlen(piece));
            } else if (end && (WPP_IS("STATUS") || WPP_IS("NTSTATUS"))) {
                NTSTATUS st = (NTSTATUS)va_arg(ap, int);
                const char *sn = SoftNdkStatusName(st);
                snprintf(piece, sizeof piece, "0x%08X%s%s%s", (unsigned)st, sn ? " (" : "",
                         sn ? sn : "", sn ? ")" : "");
                out_put(o, piece, strlen(piece));
            } else if (end && WPP_IS("HRESULT")) {
                snprintf(piece, sizeof piece, "0x%08X", (unsigned)va_arg(ap, int));
                out_put(o, piece, strlen(piece));
            } else if (end && (WPP_IS("bool") || WPP_IS("BOOLEAN"))) {
                const char *t = va_arg(ap, int) ? "TRUE" : "FALSE";
                out_put(o, t, strlen(t));
            } else {
                /* a WPP type not known here: its argument's size is unknown, stop */
                out_put(o, f - 1, strlen(f - 1));
                return;
            }
#undef WPP_IS
            f = end + 1;
            continue;
        }
        /* flags, width, precision into a C spec; '*' taken from the arguments */
        char spec[32] = "%";
        size_t sl = 1;
        while (*f && strchr("-+ #0", *f) && sl < 8)
            spec[sl++] = *f++;
        int width = -1, prec = -1;
        if (*f == '*') {
            width = va_arg(ap, int);
            f++;
        } else {
            while (*f >= '0' && *f <= '9' && sl < 16)
                spec[sl++] = *f++;
        }
        if (*f == '.') {
            f++;
            if (*f == '*') {
                prec = va_arg(ap, int);
                f++;
            } else {
                spec[sl++] = '.';
                while (*f >= '0' && *f <= '9' && sl < 24)
                    spec[sl++] = *f++;
            }
        }
        if (width >= 0)
            sl += (size_t)snprintf(spec + sl, sizeof spec - sl, "%d", width);
        if (prec >= 0)
            sl += (size_t)snprintf(spec + sl, sizeof spec - sl, ".%d", prec);
        /* size: Windows is LLP64, so 'l' is 32 bits; I64 / ll 64; I / z / t / j pointer-size */
        int size = 0; /* 0 int, 1 short, 2 char, 4 64-bit, 8 pointer-size */
        bool wide = false;
        if (f[0] == 'I' && f[1] == '6' && f[2] == '4') {
            size = 4;
            f += 3;
        } else if (f[0] == 'I' && f[1] == '3' && f[2] == '2') {
            size = 0;
            f += 3;
        } else if (f[0] == 'I') {
            size = 8;
            f++;
        } else if (f[0] == 'l' && f[1] == 'l') {
            size = 4;
            f += 2;
        } else if (f[0] == 'h' && f[1] == 'h') {
            size = 2;
            f += 2;
        } else if (*f == 'h') {
            size = 1;
            f++;
        } else if (*f == 'l') {
            wide = true; /* %ls / %lc are wide; %ld is a 32-bit LONG */
            f++;
        } else if (*f == 'w') {
            wide = true;
            f++;
        } else if (*f == 'z' || *f == 't' || *f == 'j') {
            size = 8;
            f++;
        }
        char conv = *f ? *f++ : 0;
        char piece[512];
        switch (conv) {
        case 'd':
        case 'i':
        case 'u':
        case 'x':
        case 'X':
        case 'o': {
            char c[2] = {conv, 0};
            if (size == 4 || size == 8) {
                strcat(spec, "ll");
                strcat(spec, c);
                snprintf(piece, sizeof piece, spec, va_arg(ap, long long));
            } else {
                strcat(spec, size == 1 ? "h" : size == 2 ? "hh" : "");
                strcat(spec, c);
                snprintf(piece, sizeof piece, spec, va_arg(ap, int));
            }
            out_put(o, piece, strlen(piece));
            break;
        }
        case 'p':
            snprintf(piece, sizeof piece, "%p", va_arg(ap, void *));
            out_put(o, piece, strlen(piece));
            break;
        case 'c':
        case 'C':
            if (wide || (wide_default ? conv == 'c' && size != 1 : conv == 'C')) {
                WCHAR w = (WCHAR)va_arg(ap, int);
                out_wide(o, &w, 1, false);
            } else {
                char ch = (char)va_arg(ap, int);
                out_put(o, &ch, 1);
            }
            break;
        case 's':
        case 'S':
            if (wide || (wide_default ? conv == 's' && size != 1 : conv == 'S')) {
                out_wide(o, va_arg(ap, const WCHAR *), 0, true);
            } else {
                const char *s = va_arg(ap, const char *);
                strcat(spec, "s");
                snprintf(piece, sizeof piece, spec, s ? s : "(null)");
                out_put(o, piece, strlen(piece));
            }
            break;
        case 'Z':
            if (wide) {
                const UNICODE_STRING *us = va_arg(ap, const UNICODE_STRING *);
                if (us)
                    out_wide(o, us->Buffer, us->Length / sizeof(WCHAR), false);
                else
                    out_put(o, "(null)", 6);
            } else {
                const ANSI_STRING *as = va_arg(ap, const ANSI_STRING *);
                if (as && as->Buffer)
                    out_put(o, as->Buffer, as->Length);
                else
                    out_put(o, "(null)", 6);
            }
            break;
        case 'e':
        case 'f':
        case 'g':
        case 'E':
        case 'G': {
            char c[2] = {conv, 0};
            strcat(spec, c);
            snprintf(piece, sizeof piece, spec, va_arg(ap, double));
            out_put(o, piece, strlen(piece));
            break;
        }
        default:
            /* Unknown conversion: print it literally; the argument list cannot be trusted
             * beyond this point, so stop. */
            out_put(o, "%", 1);
            if (conv)
                out_put(o, &conv, 1);
            out_put(o, f, strlen(f));
            return;
        }
    }
}

#pragma GCC diagnostic pop

static int debug_level(void)
{
    static int level = -2;
    int l = __atomic_load_n(&level, __ATOMIC_RELAXED);
    if (l == -2) {
        const char *e = getenv("SOFTNDK_WDK_DEBUG_LEVEL");
        l = e && *e ? atoi(e) : DPFLTR_INFO_LEVEL;
        __atomic_store_n(&level, l, __ATOMIC_RELAXED);
    }
    return l;
}

static ULONG print_windows(const char *fmt, va_list ap)
{
    char buf[1024];
    struct out o = {buf, 0, sizeof buf, false};
    buf[0] = 0;
    format_windows(&o, fmt, false, NULL, ap);
    /* One write per message so that lines from several threads do not interleave. */
    fputs(buf, stderr);
    return STATUS_SUCCESS;
}

/* ntstrsafe.h: the Windows conversions of DbgPrint, into a buffer. */
NTSTATUS RtlStringCbVPrintfA(PSTR pszDest, size_t cbDest, PCSTR pszFormat, va_list argList)
{
    if (!pszDest || cbDest == 0 || cbDest > NTSTRSAFE_MAX_CCH)
        return STATUS_INVALID_PARAMETER;
    struct out o = {pszDest, 0, cbDest, false};
    pszDest[0] = 0;
    format_windows(&o, pszFormat, false, NULL, argList);
    return o.truncated ? STATUS_BUFFER_OVERFLOW : STATUS_SUCCESS;
}

/* The kernel C runtime's _vsnprintf: Windows' conversions; the count of characters written
 * without the NUL when it fits with or without the NUL, else -1 and Count characters (no NUL),
 * as MSVC's. */
int SoftNdkWdkCrt__vsnprintf(char *Buffer, size_t Count, const char *Format, va_list Args)
{
    if (!Format || (!Buffer && Count > 0))
        return -1;
    /* formatted one longer than the buffer, so that "fits exactly, no room for the NUL" shows */
    char *tmp = malloc(Count + 2);
    if (!tmp)
        return -1;
    struct out o = {tmp, 0, Count + 2, false};
    tmp[0] = 0;
    format_windows(&o, Format, false, NULL, Args);
    int rc;
    if (o.len <= Count && !o.truncated) {
        memcpy(Buffer, tmp, o.len < Count ? o.len + 1 : o.len);
        rc = (int)o.len;
    } else {
        memcpy(Buffer, tmp, Count);
        rc = -1;
    }
    free(tmp);
    return rc;
}

int SoftNdkWdkCrt__snprintf(char *Buffer, size_t Count, const char *Format, ...)
{
    va_list ap;
    va_start(ap, Format);
    int rc = SoftNdkWdkCrt__vsnprintf(Buffer, Count, Format, ap);
    va_end(ap);
    return rc;
}

/* UTF-8 (what format_windows writes) to UTF-16; returns the WCHARs written (stops at Count). */
static size_t utf8_to_utf16(const char *s, size_t n, WCHAR *w, size_t count, bool *truncated)
{
    size_t i = 0, k = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        unsigned cp;
        size_t len;
        if (c < 0x80) {
            cp = c;
            len = 1;
        } else if ((c & 0xE0) == 0xC0 && i + 1 < n) {
            cp = ((c & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu);
            len = 2;
        } else if ((c & 0xF0) == 0xE0 && i + 2 < n) {
            cp = ((c & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu);
            len = 3;
        } else if ((c & 0xF8) == 0xF0 && i + 3 < n) {
            cp = ((c & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) | ((s[i + 2] & 0x3Fu) << 6) |
                 (s[i + 3] & 0x3Fu);
            len = 4;
        } else {
            cp = '?';
            len = 1;
        }
        size_t need = cp >= 0x10000 ? 2 : 1;
        if (k + need > count) {
            *truncated = true;
            break;
        }
        if (need == 2) {
            w[k++] = (WCHAR)(0xD800 + ((cp - 0x10000) >> 10));
            w[k++] = (WCHAR)(0xDC00 + ((cp - 0x10000) & 0x3FF));
        } else {
            w[k++] = (WCHAR)cp;
        }
        i += len;
    }
    return k;
}

/* The wide printf family: the WCHAR format and arguments through format_windows in UTF-8, back
 * to UTF-16. nul_on_truncation: swprintf's (ISO) contract, else _snwprintf's (MSVC's: -1 and
 * Count characters without a NUL). */
static int vsnwprintf_common(WCHAR *Buffer, size_t Count, const WCHAR *Format, va_list Args,
                             bool nul_on_truncation)
{
    if (!Format || (!Buffer && Count > 0))
        return -1;
    size_t flen = 0;
    while (Format[flen])
        flen++;
    char *fmt = malloc(flen * 3 + 1);
    /* each WCHAR of the result is at most 3 bytes of UTF-8 (a pair 4): 3 per WCHAR + slack */
    size_t cap = Count * 3 + 8;
    char *tmp = malloc(cap);
    int rc = -1;
    if (fmt && tmp) {
        struct out f = {fmt, 0, flen * 3 + 1, false};
        fmt[0] = 0;
        out_wide(&f, Format, flen, false);
        struct out o = {tmp, 0, cap, false};
        tmp[0] = 0;
        format_windows(&o, fmt, true, NULL, Args);
        bool truncated = o.truncated;
        size_t k = utf8_to_utf16(tmp, o.len, Buffer, Count, &truncated);
        if (!truncated && k < Count) {
            Buffer[k] = 0;
            rc = (int)k;
        } else if (!truncated && k == Count && !nul_on_truncation) {
            rc = (int)k; /* fits without its NUL: MSVC returns the count, no NUL */
        } else {
            if (nul_on_truncation && Count > 0)
                Buffer[Count - 1] = 0;
            rc = -1;
        }
    }
    free(fmt);
    free(tmp);
    return rc;
}

int SoftNdkWdkCrt__vsnwprintf(WCHAR *Buffer, size_t Count, const WCHAR *Format, va_list Args)
{
    return vsnwprintf_common(Buffer, Count, Format, Args, false);
}

int SoftNdkWdkCrt__snwprintf(WCHAR *Buffer, size_t Count, const WCHAR *Format, ...)
{
    va_list ap;
    va_start(ap, Format);
    int rc = vsnwprintf_common(Buffer, Count, Format, ap, false);
    va_end(ap);
    return rc;
}

int SoftNdkWdkCrt_vswprintf(WCHAR *Buffer, size_t Count, const WCHAR *Format, va_list Args)
{
    return vsnwprintf_common(Buffer, Count, Format, Args, true);
}

int SoftNdkWdkCrt_swprintf(WCHAR *Buffer, size_t Count, const WCHAR *Format, ...)
{
    va_list ap;
    va_start(ap, Format);
    int rc = vsnwprintf_common(Buffer, Count, Format, ap, true);
    va_end(ap);
    return rc;
}

/* WPP trace calls (softndk_wpp.h, the .tmh files of softndk-wdk-tmh): one line on stderr at
 * levels up to SOFTNDK_WDK_WPP_LEVEL (default 4, TRACE_LEVEL_INFORMATION). */
VOID SoftNdkWdkWppTrace(PCSTR File, ULONG Line, PCSTR Function, ULONG Level, PCSTR Format, ...)
{
    static int max = -1;
    int m = __atomic_load_n(&max, __ATOMIC_RELAXED);
    if (m < 0) {
        const char *e = getenv("SOFTNDK_WDK_WPP_LEVEL");
        m = e && *e ? atoi(e) : 4;
        __atomic_store_n(&max, m, __ATOMIC_RELAXED);
    }
    if ((int)Level > m || !Format)
        return;
    struct wpp_site site = {File ? File : "?", Function ? Function : "?", (unsigned)Line};
    char buf[1024];
    struct out o = {buf, 0, sizeof buf - 1, false};
    buf[0] = 0;
    va_list ap;
    va_start(ap, Format);
    format_windows(&o, Format, false, &site, ap);
    va_end(ap);
    buf[o.len++] = '\n';
    buf[o.len] = 0;
    fputs(buf, stderr);
}

ULONG DbgPrint(PCSTR Format, ...)
{
    va_list ap;
    va_start(ap, Format);
    ULONG r = print_windows(Format, ap);
    va_end(ap);
    return r;
}

ULONG vDbgPrintEx(ULONG ComponentId, ULONG Level, PCSTR Format, va_list ap)
{
    (void)ComponentId;
    int max = debug_level();
    /* Level 0-31 is a level; above that it is a bit mask of levels. */
    bool show = Level <= 31 ? (int)Level <= max
                            : max >= 0 && (Level & ((max >= 31 ? 0x7FFFFFFFu : (2u << max) - 1)));
    if (!show)
        return STATUS_SUCCESS;
    va_list copy;
    va_copy(copy, ap);
    ULONG r = print_windows(Format, copy);
    va_end(copy);
    return r;
}

ULONG DbgPrintEx(ULONG ComponentId, ULONG Level, PCSTR Format, ...)
{
    va_list ap;
    va_start(ap, Format);
    ULONG r = vDbgPrintEx(ComponentId, Level, Format, ap);
    va_end(ap);
    return r;
}

/* ------------------------------------------------------------------------------------------ */
/* Time. System time counts 100 ns units since 1601-01-01 UTC. */
#define WDK_EPOCH_DELTA 116444736000000000LL

void wdk_now(struct timespec *ts)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
}

static int64_t realtime_100ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 10000000 + ts.tv_nsec / 100 + WDK_EPOCH_DELTA;
}

bool wdk_deadline(const LARGE_INTEGER *timeout, struct timespec *deadline)
{
    if (!timeout)
        return false;
    int64_t rel = timeout->QuadPart < 0 ? -timeout->QuadPart
                                        : timeout->QuadPart - realtime_100ns();
    if (rel < 0)
        rel = 0;
    wdk_now(deadline);
    deadline->tv_sec += (time_t)(rel / 10000000);
    deadline->tv_nsec += (long)(rel % 10000000) * 100;
    if (deadline->tv_nsec >= 1000000000L) {
        deadline->tv_sec++;
        deadline->tv_nsec -= 1000000000L;
    }
    return true;
}

VOID KeQuerySystemTimePrecise(PLARGE_INTEGER CurrentTime)
{
    CurrentTime->QuadPart = realtime_100ns();
}

ULONGLONG KeQueryInterruptTime(VOID)
{
    struct timespec ts;
    wdk_now(&ts);
    return (ULONGLONG)ts.tv_sec * 10000000u + (ULONGLONG)ts.tv_nsec / 100u;
}

LARGE_INTEGER KeQueryPerformanceCounter(PLARGE_INTEGER PerformanceFrequency)
{
    LARGE_INTEGER r;
    if (PerformanceFrequency)
        PerformanceFrequency->QuadPart = 10000000; /* 100 ns ticks, a common Windows QPC rate */
    r.QuadPart = (LONGLONG)KeQueryInterruptTime();
    return r;
}

ULONG KeQueryTimeIncrement(VOID)
{
    return 156250; /* the default 15.625 ms clock tick, in 100 ns units */
}

NTSTATUS KeDelayExecutionThread(KPROCESSOR_MODE WaitMode, BOOLEAN Alertable,
                                PLARGE_INTEGER Interval)
{
    (void)WaitMode, (void)Alertable;
    wdk_require_irql_max(APC_LEVEL, "KeDelayExecutionThread");
    struct timespec deadline;
    if (!wdk_deadline(Interval, &deadline))
        return STATUS_INVALID_PARAMETER;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR) {
    }
    return STATUS_SUCCESS;
}

VOID KeStallExecutionProcessor(ULONG MicroSeconds)
{
    /* A busy wait, as on Windows: callable at any IRQL. */
    ULONGLONG end = KeQueryInterruptTime() + (ULONGLONG)MicroSeconds * 10u;
    while (KeQueryInterruptTime() < end)
        YieldProcessor();
}

/* ------------------------------------------------------------------------------------------ */
/* Processors: one group. */
ULONG KeQueryActiveProcessorCountEx(USHORT GroupNumber)
{
    if (GroupNumber != 0 && GroupNumber != ALL_PROCESSOR_GROUPS)
        return 0;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (ULONG)n : 1;
}

ULONG KeQueryActiveProcessorCount(PKAFFINITY ActiveProcessors)
{
    ULONG n = KeQueryActiveProcessorCountEx(0);
    if (ActiveProcessors)
        *ActiveProcessors = n >= 64 ? ~(KAFFINITY)0 : (((KAFFINITY)1 << n) - 1);
    return n;
}

USHORT KeQueryActiveGroupCount(VOID)
{
    return 1;
}

ULONG KeGetCurrentProcessorNumberEx(PPROCESSOR_NUMBER ProcNumber)
{
    int cpu = sched_getcpu();
    if (cpu < 0)
        cpu = 0;
    if (ProcNumber) {
        ProcNumber->Group = 0;
        ProcNumber->Number = (UCHAR)cpu;
        ProcNumber->Reserved = 0;
    }
    return (ULONG)cpu;
}

HANDLE PsGetCurrentThreadId(VOID)
{
    return (HANDLE)(uintptr_t)syscall(SYS_gettid);
}

HANDLE PsGetCurrentProcessId(VOID)
{
    return (HANDLE)(uintptr_t)getpid();
}
