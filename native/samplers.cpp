// The samplers linked into the harness, by name: LLGBRIDGE_SAMPLERS is X(name) for each, and
// llgbridge_init_NAME is that sampler's llama_sampler_init_llg, renamed in its object by
// native/Makefile so that several link side by side. llgbridge_test_TEST_NAME is llama.cpp's test
// TEST (shipped or pr) built against that sampler: the test's object with its `main` and its call
// of llama_sampler_init_llg renamed likewise, so the harness can run it (harness.cpp's `test`).

#include "llama.h"

typedef llama_sampler * (*sampler_init_fn)(const llama_vocab * vocab, const char * grammar_kind,
                                           const char * grammar_data);

struct linked_sampler {
    const char *    name;
    sampler_init_fn init;
};

struct linked_test {
    const char * test;
    const char * sampler;
    int (*main)(int argc, const char ** argv);
};

#define X(name)                                                                                     \
    extern "C" llama_sampler * llgbridge_init_##name(const llama_vocab *, const char *, const char *); \
    extern "C" int             llgbridge_test_shipped_##name(int, const char **);                        \
    extern "C" int             llgbridge_test_pr_##name(int, const char **);
LLGBRIDGE_SAMPLERS
#undef X

extern const linked_sampler llgbridge_samplers[] = {
#define X(name) { #name, llgbridge_init_##name },
    LLGBRIDGE_SAMPLERS
#undef X
    { nullptr, nullptr },
};

extern const linked_test llgbridge_tests[] = {
#define X(name) { "shipped", #name, llgbridge_test_shipped_##name }, { "pr", #name, llgbridge_test_pr_##name },
    LLGBRIDGE_SAMPLERS
#undef X
    { nullptr, nullptr, nullptr },
};
