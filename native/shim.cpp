// The two functions of common/common.cpp that the sources built here need, so that the build
// compiles llguidance.cpp and the test, not all of libcommon (common.cpp alone pulls in
// downloads, chat templates and the argument parser). tty_can_use_colors() is common/log.cpp's
// need; it stays for a build that links the real log.cpp.
//
// Both keep common.cpp's contract: common_tokenize() sizes its buffer from llama_tokenize()'s
// negative return; colours are off, since every output here goes to a file or a pipe.

#include "common.h"

#include <cstdint>
#include <limits>
#include <stdexcept>

bool tty_can_use_colors() {
    return false;
}

std::vector<llama_token> common_tokenize(const struct llama_vocab * vocab, const std::string & text, bool add_special,
                                         bool parse_special) {
    std::vector<llama_token> out(text.size() + 2 * add_special);
    int32_t n = llama_tokenize(vocab, text.data(), text.size(), out.data(), out.size(), add_special, parse_special);
    if (n == std::numeric_limits<int32_t>::min()) {
        throw std::runtime_error("common_tokenize: the token count overflows int32_t");
    }
    if (n < 0) {
        out.resize(-n);
        n = llama_tokenize(vocab, text.data(), text.size(), out.data(), out.size(), add_special, parse_special);
        GGML_ASSERT(n == (int32_t) out.size());
    }
    out.resize(n);
    return out;
}
