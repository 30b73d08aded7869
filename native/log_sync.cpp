// common/log.h's functions, written synchronously, in place of common/log.cpp.
//
// common/log.cpp hands each line to a worker thread. When a test aborts on a failed assertion,
// the lines still queued (the sampler's "llg error: ..." among them) are lost, or land in the
// middle of the test's own output: the captured text differed from run to run. Here a line is
// written before LOG_ERR returns, so the output, and the tables built from it, are the same
// every run. Levels and streams are log.cpp's: everything with a level goes to stderr, LOG()
// output to stdout, debug lines only above the default verbosity.

#include "log.h"

#include <cstdarg>
#include <cstdio>

static int g_verbosity_thold = LOG_DEFAULT_LLAMA;

int common_log_get_verbosity_thold(void) {
    return g_verbosity_thold;
}

void common_log_set_verbosity_thold(int verbosity) {
    g_verbosity_thold = verbosity;
}

struct common_log {};

struct common_log * common_log_main() {
    static common_log log;
    return &log;
}

void common_log_add(struct common_log * /*log*/, enum ggml_log_level level, const char * fmt, ...) {
    if (level == GGML_LOG_LEVEL_DEBUG && g_verbosity_thold < LOG_DEFAULT_DEBUG) {
        return;
    }
    FILE *  out = level == GGML_LOG_LEVEL_NONE ? stdout : stderr;
    va_list args;
    va_start(args, fmt);
    vfprintf(out, fmt, args);
    va_end(args);
    fflush(out);
}

void common_log_flush(struct common_log * /*log*/) {
    fflush(stdout);
    fflush(stderr);
}
