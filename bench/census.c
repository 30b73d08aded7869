/* The byte-diff census loop of lib/llgbridge/census.py, in C, as the speed baseline.
 *
 * For every token: llama_token_to_piece(lstrip=0, special=false) vs
 * llama_detokenize(&t, 1, remove_special=false, unparse_special=false), with the same 1024-byte
 * buffers the Python side uses. Prints `ready T` once llama.cpp is initialised (T: CLOCK_MONOTONIC
 * seconds, so the caller can tell the process's start from its vocabs), then one line per GGUF path:
 *
 *     name n_tokens differing lost_leading_space seconds load_seconds free_seconds
 *
 * `seconds` covers load + loop + free, the work the Python census also does per vocab;
 * `load_seconds` is the llama_model_load_from_file part of it, `free_seconds` the llama_model_free part.
 * Build: cc -O2 -I<include> census.c -L<lib> -Wl,-rpath,<lib> -lllama -o census
 * (python -m llgbridge.measure.bench does this against the installed llama-cpp-python).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "llama.h"

#define MAX_PIECE 1024

static void quiet(enum ggml_log_level level, const char *text, void *user_data) {
    (void)level; (void)text; (void)user_data;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ggml-vocab-NAME.gguf -> NAME, matching llgbridge.vocab.vocab_name */
static void vocab_name(const char *path, char *out, size_t cap) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *prefix = "ggml-vocab-";
    if (strncmp(base, prefix, strlen(prefix)) == 0) base += strlen(prefix);
    snprintf(out, cap, "%s", base);
    size_t n = strlen(out);
    if (n > 5 && strcmp(out + n - 5, ".gguf") == 0) out[n - 5] = '\0';
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s VOCAB.gguf...\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    printf("ready %.6f\n", now());

    static char piece[MAX_PIECE], detok[MAX_PIECE];
    int status = 0;
    for (int a = 1; a < argc; a++) {
        double t0 = now();
        struct llama_model_params params = llama_model_default_params();
        params.vocab_only = true;
        struct llama_model *model = llama_model_load_from_file(argv[a], params);
        if (!model) {
            fprintf(stderr, "%s: llama.cpp could not load it\n", argv[a]);
            status = 1;
            continue;
        }
        double loaded = now() - t0;
        const struct llama_vocab *vocab = llama_model_get_vocab(model);
        int32_t n_tokens = llama_vocab_n_tokens(vocab);
        long differing = 0, lost = 0;
        for (llama_token t = 0; t < n_tokens; t++) {
            int32_t np = llama_token_to_piece(vocab, t, piece, MAX_PIECE, 0, false);
            int32_t nd = llama_detokenize(vocab, &t, 1, detok, MAX_PIECE, false, false);
            if (np < 0 || nd < 0) {
                /* the Python side raises here; a silent skip would make the counts disagree */
                fprintf(stderr, "%s: token %d does not fit in %d bytes\n", argv[a], t, MAX_PIECE);
                status = 1;
                break;
            }
            if (np != nd || memcmp(piece, detok, (size_t)np) != 0) {
                differing++;
                if (np > 0 && piece[0] == ' ' && !(nd > 0 && detok[0] == ' ')) lost++;
            }
        }
        double looped = now();
        llama_model_free(model);
        double end = now();
        char name[256];
        vocab_name(argv[a], name, sizeof name);
        printf("%s %d %ld %ld %.6f %.6f %.6f\n", name, n_tokens, differing, lost, end - t0, loaded, end - looped);
        fflush(stdout);
    }
    llama_backend_free();
    return status;
}
