// The samplers linked into the harness, by name: LLGBRIDGE_SAMPLERS is X(name) for each, and
// llgbridge_init_NAME is that sampler's llama_sampler_init_llg, renamed in its object by
// native/Makefile so that several link side by side.

#include "llama.h"

typedef llama_sampler * (*sampler_init_fn)(const llama_vocab * vocab, const char * grammar_kind,
                                           const char * grammar_data);

struct linked_sampler {
    const char *    name;
    sampler_init_fn init;
};

#define X(name) extern "C" llama_sampler * llgbridge_init_##name(const llama_vocab *, const char *, const char *);
LLGBRIDGE_SAMPLERS
#undef X

extern const linked_sampler llgbridge_samplers[] = {
#define X(name) { #name, llgbridge_init_##name },
    LLGBRIDGE_SAMPLERS
#undef X
    { nullptr, nullptr },
};
