// The part of llguidance's C API that common/llguidance.cpp and the harness use, declared for
// the llguidance wheel's extension module (llguidance 1.9.1, `llguidance/_lib.abi3.so`), which
// exports these functions but ships no header. Upstream's header is `parser/llguidance.h` in
// guidance-ai/llguidance; names, types and field order follow it.
//
// The struct layouts are also bound with ctypes in lib/llgbridge/llg.py. `harness --layout`
// prints sizeof/offsetof of each struct as compiled here, and tests/test_native.py checks them
// against the ctypes layouts, so the two declarations cannot drift apart unnoticed.
//
// But: only what is used is declared; opaque types stay opaque.

#ifndef LLGUIDANCE_H
#define LLGUIDANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct LlgMatcher   LlgMatcher;
typedef struct LlgTokenizer LlgTokenizer;

typedef struct LlgParserLimits {
    size_t   max_items_in_row;
    uint64_t initial_lexer_fuel;
    uint64_t step_lexer_fuel;
    size_t   step_max_items;
    size_t   max_lexer_states;
    size_t   max_grammar_size;
    bool     precompute_large_lexemes;
    bool     verbose_errors;
} LlgParserLimits;

typedef struct LlgConstraintInit {
    const LlgTokenizer * tokenizer;
    uint32_t             log_buffer_level;
    uint32_t             log_stderr_level;
    bool                 ff_tokens_ok;  // ignored by llg_new_matcher
    bool                 backtrack_ok;
    LlgParserLimits      limits;
} LlgConstraintInit;

// Tokenize `bytes` into at most `output_tokens_len` tokens; returns how many tokens the whole
// input needs, which may be more than were written.
typedef size_t (*LlgTokenizeFn)(const void * user_data, const uint8_t * bytes, size_t bytes_len,
                                uint32_t * output_tokens, size_t output_tokens_len);

typedef struct LlgTokenizerInit {
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
} LlgTokenizerInit;

LlgTokenizer * llg_new_tokenizer(const LlgTokenizerInit * tok_init, char * error_string, size_t error_string_len);
LlgTokenizer * llg_clone_tokenizer(const LlgTokenizer * tok);
void           llg_free_tokenizer(LlgTokenizer * tok);

void llg_constraint_init_set_defaults(LlgConstraintInit * init, const LlgTokenizer * tokenizer);

LlgMatcher *     llg_new_matcher(const LlgConstraintInit * init, const char * constraint_type, const char * data);
LlgMatcher *     llg_clone_matcher(const LlgMatcher * matcher);
void             llg_free_matcher(LlgMatcher * matcher);
const char *     llg_matcher_get_error(LlgMatcher * matcher);
int32_t          llg_matcher_compute_mask(LlgMatcher * matcher);
const uint32_t * llg_matcher_get_mask(LlgMatcher * matcher);
size_t           llg_matcher_get_mask_byte_size(LlgMatcher * matcher);
int32_t          llg_matcher_consume_token(LlgMatcher * matcher, uint32_t token);
int32_t          llg_matcher_reset(LlgMatcher * matcher);

#ifdef __cplusplus
}
#endif

#endif  // LLGUIDANCE_H
