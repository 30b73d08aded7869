// Drives the compiled llama_sampler_init_llg (common/llguidance.cpp, as shipped or with the PR)
// the way common/sampling.cpp does: apply the grammar sampler to the full candidate array, pick a
// token, accept it. At each step it prints which tokens the sampler left allowed, so that the
// Python port in lib/llgbridge can be checked against the real code, cell by cell.
//
// Every sampler is linked in, side by side (native/Makefile renames each object's
// llama_sampler_init_llg to llgbridge_init_NAME, its only external symbol; samplers.cpp lists
// them), so one process loads the vocab once for all of them. Each object keeps its own
// tokenizer cache (common/llguidance.cpp:141-146), so each sampler builds its tokenizer from the
// vocab once per process, as in a program that links only it.
//
//   harness VOCAB.gguf < jobs      one job per input line, results on stdout
//   harness --layout               sizeof/offsetof of the llguidance structs as compiled here
//   harness --samplers             the samplers linked in, one name a line
//   harness --tests                llama.cpp's tests linked in, "TEST SAMPLER" a line
//
// A line    sampler NAME   runs the jobs after it through sampler NAME (before any: the first
// linked); it is echoed as  @sampler NAME.
// A line    test TEST SAMPLER TIMEOUT DIR_HEX   runs llama.cpp's test TEST (shipped or pr) built
// against SAMPLER, as its own binary test-TEST-SAMPLER would run on this vocab, in a child forked
// from this process: the child's stdout and stderr go to DIR/TEST-SAMPLER.out and .err, its
// working directory is DIR, and its load of the vocab is given the model loaded here
// (kv_override.cpp), so it starts with the vocab read and, where this process ran SAMPLER's jobs,
// its tokenizer built (each sampler caches it per vocab, common/llguidance.cpp:179-183). A child
// that runs past TIMEOUT seconds is killed. Then
//   @test TEST SAMPLER EXIT NS    EXIT as a shell shows it (128 + signal; 124: timed out),
//                                 NS the child's wall time
// A job line is   job ID MAX_STEPS GRAMMAR_HEX TOKENS
//   GRAMMAR_HEX   the lark grammar, hex-encoded (a grammar has spaces and newlines)
//   TOKENS        comma-separated ids to accept in turn, "." for none (position 0 only), or
//                 "follow": accept the lowest allowed id that is not EOS/EOT, as the Python
//                 forced-mask test does, until none is left, MAX_STEPS, or every token is
//                 allowed (the sampler has dropped its grammar)
//
// Output lines starting with "@" are the harness's; any other line is the log (common/log.cpp
// and llama.cpp errors), which goes to the same descriptor in order. The log is flushed after
// each call, so a log line belongs to the "@" line that follows it:
//   @vocab N_VOCAB EOS EOT
//   @job ID                  then the log of sampler construction (tokenizer warnings, grammar errors)
//   @ready ID
//   @step ID I N_ALLOWED TOKEN APPLY_NS RANGES
//                            RANGES are the allowed ids as "a-b,c,..." ("." when none); TOKEN is
//                            the token accepted after this step (-1 when none); APPLY_NS the
//                            wall time of llama_sampler_apply
//   @done ID
//
// But: the candidate array is rebuilt with every logit 0 before each step, so "allowed" means
// "not set to -INFINITY", exactly what the sampler decides; no model and no context are loaded.

#include "llama.h"
#include "llguidance.h"
#include "log.h"
#include "sampling.h"

#include <chrono>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

typedef llama_sampler * (*sampler_init_fn)(const llama_vocab * vocab, const char * grammar_kind,
                                           const char * grammar_data);

struct linked_sampler {
    const char *    name;
    sampler_init_fn init;
};

extern const linked_sampler llgbridge_samplers[];  // samplers.cpp, ended by { nullptr, nullptr }

struct linked_test {
    const char * test;
    const char * sampler;
    int (*main)(int argc, const char ** argv);
};

extern const linked_test llgbridge_tests[];  // samplers.cpp, ended by { nullptr, nullptr, nullptr }

extern "C" void llgbridge_preload(const char * path_model, llama_model * model);  // kv_override.cpp

#define LAYOUT(S, F) printf("@layout %s %s %zu %zu\n", #S, #F, offsetof(S, F), sizeof(((S *) nullptr)->F))

static int print_layout() {
    printf("@sizeof LlgParserLimits %zu\n", sizeof(LlgParserLimits));
    LAYOUT(LlgParserLimits, max_items_in_row);
    LAYOUT(LlgParserLimits, initial_lexer_fuel);
    LAYOUT(LlgParserLimits, step_lexer_fuel);
    LAYOUT(LlgParserLimits, step_max_items);
    LAYOUT(LlgParserLimits, max_lexer_states);
    LAYOUT(LlgParserLimits, max_grammar_size);
    LAYOUT(LlgParserLimits, precompute_large_lexemes);
    LAYOUT(LlgParserLimits, verbose_errors);
    printf("@sizeof LlgConstraintInit %zu\n", sizeof(LlgConstraintInit));
    LAYOUT(LlgConstraintInit, tokenizer);
    LAYOUT(LlgConstraintInit, log_buffer_level);
    LAYOUT(LlgConstraintInit, log_stderr_level);
    LAYOUT(LlgConstraintInit, ff_tokens_ok);
    LAYOUT(LlgConstraintInit, backtrack_ok);
    LAYOUT(LlgConstraintInit, limits);
    printf("@sizeof LlgTokenizerInit %zu\n", sizeof(LlgTokenizerInit));
    LAYOUT(LlgTokenizerInit, vocab_size);
    LAYOUT(LlgTokenizerInit, tok_eos);
    LAYOUT(LlgTokenizerInit, token_lens);
    LAYOUT(LlgTokenizerInit, token_bytes);
    LAYOUT(LlgTokenizerInit, tokenizer_json);
    LAYOUT(LlgTokenizerInit, tokenize_assumes_string);
    LAYOUT(LlgTokenizerInit, tokenize_fn);
    LAYOUT(LlgTokenizerInit, use_approximate_greedy_tokenize_fn);
    LAYOUT(LlgTokenizerInit, tokenize_user_data);
    LAYOUT(LlgTokenizerInit, slices);
    return 0;
}

static bool unhex(const std::string & hex, std::string & out) {
    if (hex.size() % 2) {
        return false;
    }
    out.clear();
    for (size_t i = 0; i < hex.size(); i += 2) {
        unsigned v = 0;
        if (sscanf(hex.c_str() + i, "%2x", &v) != 1) {
            return false;
        }
        out.push_back((char) v);
    }
    return true;
}

static std::string ranges(const std::vector<llama_token> & ids) {
    if (ids.empty()) {
        return ".";
    }
    std::string out;
    for (size_t i = 0; i < ids.size();) {
        size_t j = i;
        while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) {
            j++;
        }
        if (!out.empty()) {
            out += ',';
        }
        out += std::to_string(ids[i]);
        if (j > i) {
            out += '-' + std::to_string(ids[j]);
        }
        i = j + 1;
    }
    return out;
}

// llama.cpp's loader is chatty; keep only its errors, on the same descriptor as everything else,
// and what it says of key overrides (kv_override.cpp), so the caller can see each one was taken:
// the loader writes that line in two calls, the key and then the value
static void quiet_log(ggml_log_level level, const char * text, void * /*user_data*/) {
    static bool override_value_next = false;
    const bool about_override = strstr(text, "metadata override") != nullptr;
    if (level == GGML_LOG_LEVEL_ERROR || about_override || override_value_next) {
        fputs(text, stderr);
    }
    override_value_next = about_override && strstr(text, "Using metadata override") != nullptr;
}

static void flush_all() {
    fflush(stdout);
    common_log_flush(common_log_main());
    fflush(stderr);
}

static void run_job(sampler_init_fn init, const llama_vocab * vocab, const std::string & id, int max_steps, const std::string & grammar,
                    const std::string & tokens_arg) {
    const int32_t     n_vocab = llama_vocab_n_tokens(vocab);
    const llama_token eos     = llama_vocab_eos(vocab);
    const llama_token eot     = llama_vocab_eot(vocab);

    const bool               follow = tokens_arg == "follow";
    std::vector<llama_token> tokens;
    if (!follow && tokens_arg != ".") {
        std::stringstream ss(tokens_arg);
        std::string       t;
        while (std::getline(ss, t, ',')) {
            tokens.push_back(std::stoi(t));
        }
    }

    printf("@job %s\n", id.c_str());
    flush_all();
    llama_sampler * smpl = init(vocab, "lark", grammar.c_str());
    flush_all();
    printf("@ready %s\n", id.c_str());

    std::vector<llama_token_data> cur(n_vocab);
    std::vector<llama_token>      allowed;
    allowed.reserve(n_vocab);
    for (int i = 0;; i++) {
        for (llama_token t = 0; t < n_vocab; t++) {
            cur[t] = llama_token_data{ t, 0.0f, 0.0f };
        }
        llama_token_data_array arr{ cur.data(), cur.size(), -1, false };
        flush_all();
        const auto t0 = std::chrono::steady_clock::now();
        llama_sampler_apply(smpl, &arr);
        const auto ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
        flush_all();

        allowed.clear();
        for (const auto & td : cur) {
            if (td.logit != -INFINITY) {
                allowed.push_back(td.id);
            }
        }

        llama_token next = -1;
        if (follow) {
            const bool dropped = (int32_t) allowed.size() == n_vocab;
            if (i < max_steps && !dropped) {
                for (const auto t : allowed) {
                    if (t != eos && t != eot) {
                        next = t;
                        break;
                    }
                }
            }
        } else if (i < (int) tokens.size()) {
            next = tokens[i];
        }
        printf("@step %s %d %zu %d %lld %s\n", id.c_str(), i, allowed.size(), next, (long long) ns,
               ranges(allowed).c_str());
        if (next < 0) {
            break;
        }
        llama_sampler_accept(smpl, next);
    }
    llama_sampler_free(smpl);
    flush_all();
    printf("@done %s\n", id.c_str());
    fflush(stdout);
}

static void run_test(const linked_test & t, const char * vocab_path, int timeout_s, const std::string & dir) {
    flush_all();  // nothing buffered here is written twice
    const auto  t0  = std::chrono::steady_clock::now();
    const pid_t pid = fork();
    if (pid == 0) {
        const std::string base = dir + "/" + t.test + "-" + t.sampler;
        const int         out  = open((base + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int         err  = open((base + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int         nul  = open("/dev/null", O_RDONLY);
        if (out < 0 || err < 0 || nul < 0 || chdir(dir.c_str()) != 0) {
            _exit(125);
        }
        dup2(nul, STDIN_FILENO);
        dup2(out, STDOUT_FILENO);
        dup2(err, STDERR_FILENO);
        // as the test's own binary: llama.cpp's default log, everything it says
        llama_log_set(nullptr, nullptr);
        const std::string name    = std::string("test-") + t.test + "-" + t.sampler;
        // and its name, where a failed assert() says which program it was
        program_invocation_name = program_invocation_short_name = strdup(name.c_str());
        const char *      args[3] = { name.c_str(), vocab_path, nullptr };
        const int         rc      = t.main(2, args);
        fflush(stdout);
        fflush(stderr);
        _exit(rc & 0xff);
    }
    int  code = 0;
    if (pid < 0) {
        code = 125;
    } else {
        const auto deadline = t0 + std::chrono::seconds(timeout_s);
        int        status   = 0;
        useconds_t nap      = 100;
        while (waitpid(pid, &status, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() > deadline) {
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
                status = -1;
                break;
            }
            usleep(nap);
            nap = nap < 5000 ? nap * 2 : nap;
        }
        code = status == -1 ? 124 : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    }
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    printf("@test %s %s %d %lld\n", t.test, t.sampler, code, (long long) ns);
    fflush(stdout);
}

int main(int argc, char ** argv) {
    if (argc == 2 && strcmp(argv[1], "--layout") == 0) {
        return print_layout();
    }
    if (argc == 2 && strcmp(argv[1], "--samplers") == 0) {
        for (const linked_sampler * s = llgbridge_samplers; s->name != nullptr; s++) {
            printf("%s\n", s->name);
        }
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--tests") == 0) {
        for (const linked_test * t = llgbridge_tests; t->test != nullptr; t++) {
            printf("%s %s\n", t->test, t->sampler);
        }
        return 0;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: %s VOCAB.gguf < jobs | %s --layout | %s --samplers\n", argv[0], argv[0], argv[0]);
        return 2;
    }
    // one ordered stream: the log's lines land before the "@" line they belong to
    dup2(STDOUT_FILENO, STDERR_FILENO);
    setvbuf(stdout, nullptr, _IOLBF, 1 << 16);

    llama_log_set(quiet_log, nullptr);
    llama_backend_init();
    auto mparams       = llama_model_default_params();
    mparams.vocab_only = true;
    llama_model * model = llama_model_load_from_file(argv[1], mparams);
    if (model == nullptr) {
        printf("@error failed to load the vocab %s\n", argv[1]);
        return 1;
    }
    llgbridge_preload(argv[1], model);
    const llama_vocab * vocab = llama_model_get_vocab(model);
    printf("@vocab %d %d %d\n", llama_vocab_n_tokens(vocab), llama_vocab_eos(vocab), llama_vocab_eot(vocab));

    sampler_init_fn init = llgbridge_samplers[0].init;
    std::string     line;
    while (std::getline(std::cin, line)) {
        std::stringstream ss(line);
        std::string       kind, id, hex, toks;
        int               max_steps = 0;
        if (line.rfind("sampler ", 0) == 0) {
            const std::string name = line.substr(8);
            init                   = nullptr;
            for (const linked_sampler * s = llgbridge_samplers; s->name != nullptr; s++) {
                if (name == s->name) {
                    init = s->init;
                }
            }
            if (init == nullptr) {
                printf("@error no sampler %s linked in\n", name.c_str());
                return 2;
            }
            printf("@sampler %s\n", name.c_str());
            continue;
        }
        if (line.rfind("test ", 0) == 0) {
            std::string test, sampler, dir;
            int         timeout_s = 0;
            ss >> kind >> test >> sampler >> timeout_s >> hex;
            const linked_test * found = nullptr;
            for (const linked_test * t = llgbridge_tests; t->test != nullptr; t++) {
                if (test == t->test && sampler == t->sampler) {
                    found = t;
                }
            }
            if (found == nullptr || timeout_s <= 0 || !unhex(hex, dir)) {
                printf("@error bad test line: %s\n", line.c_str());
                return 2;
            }
            run_test(*found, argv[1], timeout_s, dir);
            continue;
        }
        if (!(ss >> kind >> id >> max_steps >> hex >> toks) || kind != "job") {
            printf("@error bad job line: %s\n", line.c_str());
            return 2;
        }
        std::string grammar;
        if (!unhex(hex, grammar)) {
            printf("@error bad grammar hex in job %s\n", id.c_str());
            return 2;
        }
        run_job(init, vocab, id, max_steps, grammar, toks);
    }

    llama_model_free(model);
    llama_backend_free();
    return 0;
}
