// llama.cpp's key overrides (--override-kv KEY=TYPE:VALUE) for the programs built here.
//
// llama.cpp's own test-grammar-llguidance takes one argument, the vocab file, and loads it with
// llama_model_default_params(): there is no way in for an override without editing the test, and
// the test under review must stay as shipped. So the suite links every program with
// `-Wl,--wrap=llama_model_load_from_file`: the linker sends the program's call here, and this
// adds the overrides named in LLGBRIDGE_KV_OVERRIDES (one KEY=TYPE:VALUE a line, checked by
// llgbridge.overrides before it is set) to llama_model_params.kv_overrides, then calls the real
// function. Unset or empty, the parameters pass through untouched: the program is the one shipped.
// The harness takes them the same way, so one parser serves every compiled program.
//
// The parsing follows common/common.cpp's string_parse_kv_override (not linked here: it lives in
// libcommon, which this build replaces with two small stand-ins). A line it cannot read fails the
// load, as --override-kv fails the server's start.

#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" llama_model * __real_llama_model_load_from_file(const char * path_model, llama_model_params params);

// The harness runs llama.cpp's tests in children it forks after loading the vocab (harness.cpp's
// `test` line): a test's own load of the same file is given that model, so the vocab is read and
// its tokenizers built once per process, not once per test
static std::string   g_preloaded_path;
static llama_model * g_preloaded = nullptr;

extern "C" void llgbridge_preload(const char * path_model, llama_model * model) {
    g_preloaded_path = path_model;
    g_preloaded      = model;
}

static bool parse_line(const std::string & line, llama_model_kv_override & kvo) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0 || eq >= sizeof(kvo.key)) {
        return false;
    }
    std::memset(&kvo, 0, sizeof(kvo));
    std::memcpy(kvo.key, line.data(), eq);
    const std::string rest = line.substr(eq + 1);
    auto starts = [&](const char * p) { return rest.compare(0, std::strlen(p), p) == 0; };
    if (starts("int:")) {
        kvo.tag     = LLAMA_KV_OVERRIDE_TYPE_INT;
        kvo.val_i64 = std::atoll(rest.c_str() + 4);
    } else if (starts("float:")) {
        kvo.tag     = LLAMA_KV_OVERRIDE_TYPE_FLOAT;
        kvo.val_f64 = std::atof(rest.c_str() + 6);
    } else if (starts("bool:")) {
        kvo.tag = LLAMA_KV_OVERRIDE_TYPE_BOOL;
        const std::string v = rest.substr(5);
        if (v != "true" && v != "false") {
            return false;
        }
        kvo.val_bool = v == "true";
    } else if (starts("str:")) {
        kvo.tag = LLAMA_KV_OVERRIDE_TYPE_STR;
        const std::string v = rest.substr(4);
        if (v.size() >= sizeof(kvo.val_str)) {
            return false;
        }
        std::memcpy(kvo.val_str, v.data(), v.size());
    } else {
        return false;
    }
    return true;
}

extern "C" llama_model * __wrap_llama_model_load_from_file(const char * path_model, llama_model_params params) {
    if (g_preloaded != nullptr && path_model != nullptr && g_preloaded_path == path_model && params.vocab_only) {
        return g_preloaded;
    }
    // llama.cpp copies the overrides into its loader's map; kept for the process's life all the same
    static std::vector<llama_model_kv_override> kept;
    const char * given = std::getenv("LLGBRIDGE_KV_OVERRIDES");
    if (given != nullptr && *given != '\0') {
        kept.clear();
        std::string all(given);
        size_t start = 0;
        while (start <= all.size()) {
            size_t end = all.find('\n', start);
            if (end == std::string::npos) {
                end = all.size();
            }
            const std::string line = all.substr(start, end - start);
            if (!line.empty()) {
                llama_model_kv_override kvo;
                if (!parse_line(line, kvo)) {
                    fprintf(stderr, "llgbridge: malformed KV override '%s' (LLGBRIDGE_KV_OVERRIDES)\n", line.c_str());
                    return nullptr;
                }
                kept.push_back(kvo);
            }
            start = end + 1;
        }
        llama_model_kv_override end_marker;
        std::memset(&end_marker, 0, sizeof(end_marker));
        kept.push_back(end_marker);
        params.kv_overrides = kept.data();
    }
    return __real_llama_model_load_from_file(path_model, params);
}
