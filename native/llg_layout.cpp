// Compile-time proof that one object of common/llguidance.cpp, compiled against native/llguidance.h
// (llguidance 1.9.1's layout), passes llguidance 1.0.1 the structures 1.0.1 expects.
//
// The 1.0.1 structures below are transcribed from llguidance's parser/llguidance.h at tag v1.0.1
// (the version llama.cpp pins). The one difference: LlgParserLimits gained a trailing
// `bool verbose_errors` in 1.1.2, which sits in what was padding. common/llguidance.cpp never sets
// it; it calls llg_constraint_init_set_defaults (the library fills the struct) and reads nothing
// back. If a size or an offset differed, this file would not compile and `make server` says so.
#include <cstddef>
#include "llguidance.h"

namespace v101 {
struct LlgParserLimits {
    size_t   max_items_in_row;
    uint64_t initial_lexer_fuel;
    uint64_t step_lexer_fuel;
    size_t   step_max_items;
    size_t   max_lexer_states;
    size_t   max_grammar_size;
    bool     precompute_large_lexemes;
};
struct LlgConstraintInit {
    const void *    tokenizer;
    uint32_t        log_buffer_level;
    uint32_t        log_stderr_level;
    bool            ff_tokens_ok;
    bool            backtrack_ok;
    LlgParserLimits limits;
};
struct LlgTokenizerInit {
    uint32_t             vocab_size;
    uint32_t             tok_eos;
    const uint32_t *     token_lens;
    const uint8_t *      token_bytes;
    const char *         tokenizer_json;
    bool                 tokenize_assumes_string;
    LlgTokenizeFn        tokenize_fn;
    bool                 use_approximate_greedy_tokenize_fn;
    const void *         tokenize_user_data;
    const char * const * slices;
};
}  // namespace v101

#define SAME(T, f) static_assert(offsetof(::T, f) == offsetof(v101::T, f), #T "." #f " moved")
#define SIZE(T) static_assert(sizeof(::T) == sizeof(v101::T), "sizeof " #T " differs")

SIZE(LlgParserLimits);
SAME(LlgParserLimits, max_items_in_row);
SAME(LlgParserLimits, initial_lexer_fuel);
SAME(LlgParserLimits, step_lexer_fuel);
SAME(LlgParserLimits, step_max_items);
SAME(LlgParserLimits, max_lexer_states);
SAME(LlgParserLimits, max_grammar_size);
SAME(LlgParserLimits, precompute_large_lexemes);

SIZE(LlgConstraintInit);
SAME(LlgConstraintInit, tokenizer);
SAME(LlgConstraintInit, log_buffer_level);
SAME(LlgConstraintInit, log_stderr_level);
SAME(LlgConstraintInit, ff_tokens_ok);
SAME(LlgConstraintInit, backtrack_ok);
SAME(LlgConstraintInit, limits);

SIZE(LlgTokenizerInit);
SAME(LlgTokenizerInit, vocab_size);
SAME(LlgTokenizerInit, tok_eos);
SAME(LlgTokenizerInit, token_lens);
SAME(LlgTokenizerInit, token_bytes);
SAME(LlgTokenizerInit, tokenizer_json);
SAME(LlgTokenizerInit, tokenize_assumes_string);
SAME(LlgTokenizerInit, tokenize_fn);
SAME(LlgTokenizerInit, use_approximate_greedy_tokenize_fn);
SAME(LlgTokenizerInit, tokenize_user_data);
SAME(LlgTokenizerInit, slices);
